"""A FastAPI app that sends its event inside the request's transaction.

``POST /orders`` inserts the order and sends ``order.placed`` in one
transaction: the event exists exactly when the order does. A request that
fails after the insert rolls both back. The script serves the app on
127.0.0.1 (a free port), posts a few orders with httpx, reads the events
back, and stops.

Run the app yourself with ``uvicorn examples.fastapi_app:app`` (PGQUE_DSN set).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Annotated, Any

import httpx
import psycopg
import uvicorn
from fastapi import Depends, FastAPI, HTTPException
from psycopg_pool import ConnectionPool
from pydantic import BaseModel

import pgque

DSN = sys.argv[1] if len(sys.argv) > 1 and __name__ == "__main__" else os.environ["PGQUE_DSN"]

app = FastAPI(title="orders")
pool = ConnectionPool(DSN, min_size=1, max_size=4, open=False)


class Order(BaseModel):
    item: str
    quantity: int


def transaction() -> Iterator[psycopg.Connection[Any]]:
    """One pooled connection per request; commits if the request succeeds."""
    with pool.connection() as conn:  # commits on success, rolls back on an exception
        yield conn


Tx = Annotated[psycopg.Connection[Any], Depends(transaction)]


@app.post("/orders", status_code=201)
def place_order(order: Order, conn: Tx) -> dict[str, int]:
    row = conn.execute(
        "insert into shop_orders (item, quantity) values (%s, %s) returning id",
        (order.item, order.quantity),
    ).fetchone()
    assert row is not None
    event_id = pgque.PgqueClient(conn).send(
        "shop", {"order_id": row[0], "item": order.item}, type="order.placed"
    )
    if order.quantity <= 0:
        raise HTTPException(422, "quantity must be positive")  # rolls back order and event
    return {"order_id": row[0], "event_id": event_id}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        pgque.install(conn)
        conn.execute("create table if not exists shop_orders"
                     " (id serial primary key, item text, quantity int)")  # fmt: skip
        conn.execute("select pgque.create_queue('shop')")
        conn.execute("select pgque.subscribe('shop', 'fulfilment')")

    pool.open()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run)
    thread.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            for _ in range(100):  # wait for the server
                try:
                    http.get("/docs")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            for item, quantity in (("book", 1), ("pen", 0), ("lamp", 2)):
                response = http.post("/orders", json={"item": item, "quantity": quantity})
                print(f"POST /orders {item} x{quantity}: {response.status_code} {response.json()}")
    finally:
        server.should_exit = True
        thread.join()
        pool.close()

    with pgque.connect(DSN, autocommit=True) as client:
        client.conn.execute("select pgque.force_next_tick('shop')")
        client.ticker("shop")
        events = client.receive("shop", "fulfilment")
        client.ack(events[0].batch_id)
    print("events:", [e.json()["item"] for e in events])
    assert [e.json()["item"] for e in events] == ["book", "lamp"]  # no event for the failure


if __name__ == "__main__":
    main()
