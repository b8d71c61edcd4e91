"""Orders written by the tests' views and handlers; what the handlers saw."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    """An order written next to the event that announces it."""

    item = models.CharField(max_length=100, unique=True)


class Handled(models.Model):
    """A row a handler writes, to see that it commits with the batch's ack."""

    order_item = models.CharField(max_length=100, unique=True)
