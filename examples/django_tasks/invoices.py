"""The example's tasks: each writes an invoice row, in the worker's transaction."""

from __future__ import annotations

from django.db import connection
from django.tasks import task


@task
def send_invoice(order: str) -> str:
    """Write the invoice of ``order``; returns its number."""
    with connection.cursor() as cursor:
        cursor.execute("insert into invoice (order_ref) values (%s) returning id", [order])
        number = cursor.fetchone()[0]
    return f"INV-{number}"


@task
def refuse(order: str) -> None:
    """Write an invoice, then fail: the row rolls back, the result says why."""
    with connection.cursor() as cursor:
        cursor.execute("insert into invoice (order_ref) values (%s)", [order])
    raise ValueError(f"order {order} has no address")
