"""The benchmark cases, registered in the order a full run takes them."""

from . import bounds, coop, drain, held_xmin, latency, send, spark, workers  # noqa: F401
