"""PySpark connector: read pgque queues as streams or tables, write DataFrames into queues.

Needs PySpark 4.2 or later, pyarrow and adbc-driver-postgresql (``pip
install '.[spark]'`` from the pgque clone), on
the driver and on the workers: Spark starts workers with ``python3`` from
``PATH`` unless ``PYSPARK_PYTHON`` names another interpreter.

``format("pgque")`` works without any call: the wheel ships the top-level
module ``pyspark_pgque``, which Spark 4 finds among the workers' modules.
:func:`register` registers the source explicitly::

    import pgque.spark
    pgque.spark.register(spark)
    events = (spark.readStream.format("pgque")
              .option("dsn", dsn).option("queue", "orders").option("consumer", "etl")
              .load())

Offsets are tick ids; a micro-batch reads exactly the events between two
ticks. See docs/spark.md for options, schema, guarantees and limits.
"""

from __future__ import annotations

from typing import Any

try:
    import adbc_driver_postgresql  # type: ignore[import-untyped,unused-ignore]  # noqa: F401
    import pyarrow  # type: ignore[import-untyped]  # noqa: F401
    import pyspark
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"pgque.spark needs pyspark, pyarrow and adbc-driver-postgresql ({exc}); install"
        " them from the pgque clone"
        " with: pip install '.[spark]'"
    ) from exc

if tuple(int(p) for p in pyspark.__version__.split(".")[:2] if p.isdigit()) < (4, 2):
    raise ImportError(  # pragma: no cover - depends on the environment
        f"pgque.spark needs PySpark 4.2 or later (streaming read limits), found"
        f" {pyspark.__version__}"
    )

from pgque.spark._db import call
from pgque.spark._options import SinkOptions, SourceOptions
from pgque.spark._read import SCHEMA
from pgque.spark._source import PgqueDataSource

__all__ = ["SCHEMA", "PgqueDataSource", "SinkOptions", "SourceOptions", "advance_consumer",
           "register"]  # fmt: skip


def register(spark: Any) -> None:
    """Register the ``pgque`` format on a SparkSession (not needed when ``pyspark_pgque``
    is importable by the workers, as it is after ``pip install '.[spark]'``)."""
    spark.dataSource.register(PgqueDataSource)


def advance_consumer(dsn: str, queue: str, consumer: str, tick: int) -> None:
    """Move ``consumer`` to ``tick`` after a batch read's result is safe.

    A batch read (``spark.read.format("pgque")`` with option ``consumer``)
    moves nothing; pass the ``end_tick`` of the rows you processed here, so
    rotation may drop them. Raises when the consumer is not subscribed or the
    tick no longer exists.
    """
    call(dsn, "spark_advance", queue, consumer, tick)
