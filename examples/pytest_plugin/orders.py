"""A tiny application to test: orders are stored and announced in one transaction."""

from __future__ import annotations

from typing import Any

import psycopg

import pgque

SCHEMA = "create table if not exists orders (id int primary key, amount int not null)"


def place_order(
    conn: psycopg.Connection[Any], producer: pgque.Producer, order_id: int, amount: int
) -> int:
    """Store an order and send ``order.placed`` with it (the outbox pattern).

    The message commits with the row, or neither does.
    """
    with conn.transaction():
        conn.execute("insert into orders (id, amount) values (%s, %s)", (order_id, amount))
        return producer.send(
            "orders", {"id": order_id, "amount": amount}, type="order.placed", conn=conn
        )


class Billing:
    """A consumer's handler: bills orders, dead-letters the impossible ones."""

    def __init__(self) -> None:
        self.billed: list[int] = []

    def handle(self, msg: pgque.Message) -> None:
        order = msg.json()
        if order["amount"] < 0:
            msg.dead_letter("negative amount")
            return
        self.billed.append(order["id"])
