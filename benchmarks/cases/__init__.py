"""The benchmark cases, registered in the order a full run takes them."""

# The import order is the run order (hence no sorting).
from . import bounds, send, send_parts, drain, coop, workers, latency  # noqa: F401, I001
from . import field, held_xmin, spark, scale  # noqa: F401
