"""The soak (tests/soak.py) in short: ~25 s of concurrent producers, racing tickers and consumers.

``PGQUE_SOAK_SECONDS`` changes the duration; run ``python tests/soak.py`` for long soaks.
"""

from __future__ import annotations

import os

import pytest

from soak import SoakConfig, run_soak

pytestmark = [pytest.mark.slow, pytest.mark.concurrency]


def test_soak(db: str) -> None:
    seconds = float(os.environ.get("PGQUE_SOAK_SECONDS", "25"))
    report = run_soak(db, SoakConfig(seconds=seconds))  # raises SoakFailure on any violation
    print(report.summary())
    assert report.counts["events_committed"] > 1000
    assert report.counts["txns_rolled_back"] > 0 and report.counts["events_savepoint_rolled_back"]
    assert report.ticks > 50
    assert all(log.events > 0 for log in report.consumers.values())
    assert set(report.consumers) == {"fast", "lagging", "late"}
    if report.rotations is not None:
        assert report.rotations > 0, "rotation is on but never happened"
