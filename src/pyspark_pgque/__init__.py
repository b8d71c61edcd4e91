"""Spark 4 data source discovery module for pgque.

Spark imports every top-level module named ``pyspark_*`` in the workers'
Python and registers each one's ``DefaultSource`` under its ``name()``:
this one makes ``format("pgque")`` work with no call by the user. The
implementation is :mod:`pgque.spark`.

Spark imports these modules for every Python data source lookup, so a
failing import here would break other sources too: when pgque's Spark
support cannot load (no pyarrow, PySpark too old) this module only warns and
offers no ``DefaultSource``.
"""

from __future__ import annotations

import warnings

__all__ = ["DefaultSource"]

try:
    from pgque.spark import PgqueDataSource as DefaultSource
except ImportError as _exc:  # pragma: no cover - depends on the environment
    warnings.warn(f"format('pgque') is unavailable: {_exc}", RuntimeWarning, stacklevel=1)
    __all__ = []
