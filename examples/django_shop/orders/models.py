"""An order, written in the same transaction as its ``order.created`` event."""

from django.db import models


class Order(models.Model):
    """What a customer ordered, and whether the confirmation went out."""

    item = models.CharField(max_length=100)
    email = models.EmailField()
    confirmed = models.BooleanField(default=False)
