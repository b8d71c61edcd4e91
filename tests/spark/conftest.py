"""Spark connector tests: one local SparkSession per module (see ``spark_helpers``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """The module's SparkSession (``format("pgque")`` found without registering it)."""
    from spark_helpers import new_session

    session = new_session("pgque-tests")
    try:
        yield session
    finally:
        session.stop()
