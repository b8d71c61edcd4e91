"""The transactional outbox with SQLAlchemy: the order row and its event in one session.

``pgque.sqlalchemy.send`` writes the event through the session's own
connection (an engine on ``postgresql+psycopg``), so it commits or rolls
back with the ORM writes; no second connection, no outbox table to poll.

    pgque dev                      # in another terminal: a throwaway PostgreSQL
    export PGQUE_DSN=...           # the DSN it prints
    python examples/sqlalchemy_outbox.py
"""

from __future__ import annotations

import os
import sys

import psycopg
from sqlalchemy import String, create_engine, select
from sqlalchemy.engine import URL
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import pgque
import pgque.sqlalchemy

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["PGQUE_DSN"]


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "outbox_order"
    id: Mapped[int] = mapped_column(primary_key=True)
    item: Mapped[str] = mapped_column(String(100))


def engine_url(dsn: str) -> URL:
    """The libpq DSN as a SQLAlchemy URL on the psycopg (3) driver."""
    parts = psycopg.conninfo.conninfo_to_dict(dsn)
    return URL.create(
        "postgresql+psycopg",
        username=str(parts.pop("user", "")) or None,
        password=str(parts.pop("password", "")) or None,
        database=str(parts.pop("dbname", "")) or None,
        query={key: str(value) for key, value in parts.items()},
    )


with psycopg.connect(DSN, autocommit=True) as conn:
    pgque.install(conn)
    conn.execute("select pgque.create_queue('outbox')")
    conn.execute("select pgque.subscribe('outbox', 'shipping')")

engine = create_engine(engine_url(DSN))
Base.metadata.create_all(engine)

with Session(engine) as session:
    for item in ("book", "lamp"):
        with session.begin():  # the order and its event commit together
            order = Order(item=item)
            session.add(order)
            session.flush()  # the order's id, for the event
            pgque.sqlalchemy.send(session, "outbox", {"order_id": order.id, "item": item},
                                  type="order.created")  # fmt: skip
    try:
        with session.begin():  # an error after the send: neither the row nor the event stays
            session.add(Order(item="ghost"))
            pgque.sqlalchemy.send(session, "outbox", {"item": "ghost"}, type="order.created")
            raise RuntimeError("payment declined")
    except RuntimeError as exc:
        print("rolled back:", exc)

consumer = pgque.Consumer(DSN, queue="outbox", name="shipping")
shipped: list[str] = []


@consumer.on("order.created")
def ship(msg: pgque.Message) -> None:
    shipped.append(msg.json()["item"])
    if len(shipped) == 2:
        consumer.stop()


consumer.start()
with Session(engine) as session:
    orders = session.scalars(select(Order.item).order_by(Order.id)).all()
engine.dispose()
assert list(orders) == shipped == ["book", "lamp"], (orders, shipped)
print(f"shipped {shipped}")
