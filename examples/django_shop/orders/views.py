"""Placing an order: the row and its event in one transaction."""

from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from orders.models import Order
from pgque.contrib.django import send

OUT_OF_STOCK = {"unicorn"}


class OutOfStock(Exception):
    """The item cannot be shipped: the order must not exist."""


@csrf_exempt
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    """Write the order and send ``order.created``: both commit, or neither does."""
    item, email = request.POST.get("item", ""), request.POST.get("email", "")
    if not item or not email:
        return JsonResponse({"error": "item and email are required"}, status=400)
    try:
        with transaction.atomic():
            order = Order.objects.create(item=item, email=email)
            send("orders", {"order_id": order.pk}, type="order.created")
            if item in OUT_OF_STOCK:  # found out late: the rollback takes the event too
                raise OutOfStock(item)
    except OutOfStock:
        return JsonResponse({"error": f"{item} is out of stock"}, status=409)
    return JsonResponse({"order_id": order.pk}, status=201)
