"""Whether a consumer runs an in-process :class:`~pgque.Ticker`, and the switch that
starts and stops it (``ticker="auto"`` is decided on every (re)connection)."""

from __future__ import annotations

import logging
from typing import Any

from psycopg_pool import ConnectionPool

from pgque._consumer.failures import describe, is_connection_error, setup_problem

__all__ = [
    "TickerSwitch",
    "config_unreadable",
    "scheduler_absent",
    "ticker_source",
    "ticker_wanted",
]


class TickerSwitch:
    """A consumer's in-process :class:`~pgque.Ticker`, started or stopped as decided on
    each (re)connection (:meth:`set`), and stopped when the ``with`` block ends.

    ``source`` is what the Ticker connects with (a connection string or a
    pool); None when the consumer has neither (a given connection carries the
    batches): then it warns once instead of ticking.
    """

    def __init__(
        self, source: Any, log: logging.Logger, name: str, *, pooler: bool = False
    ) -> None:
        self.source = source
        self.pooler = pooler
        self.runner: Any = None
        self._log = log
        self._name = name
        self._warned = False

    def set(self, wanted: bool) -> None:
        """Run a ticker, or not."""
        if wanted == (self.runner is not None):
            return
        if self.runner is not None:
            self.runner.stop()
            self.runner = None
            return
        if self.source is None:
            if not self._warned:
                self._warned = True
                self._log.warning("consumer %s: no in-process ticker without a connection"
                                  " string or pool to give it: give listen_dsn, or run a"
                                  " Ticker", self._name)  # fmt: skip
            return
        from pgque.ticker import Ticker  # here: the ticker is needed only when it runs

        self.runner = Ticker(self.source, pooler=self.pooler).start()

    def check(self) -> None:
        """Raise what stopped the ticker on its own (a pooler met without ``pooler=True``)."""
        failure = getattr(self.runner, "failure", None)
        if failure is not None:
            raise failure

    def __enter__(self) -> TickerSwitch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.set(False)


def config_unreadable(exc: BaseException, log: logging.Logger, name: str) -> bool:
    """pgque.config could not be read: re-raise a lost connection or a missing pgque,
    else warn and run no ticker (decided again on the next connection)."""
    if is_connection_error(exc) or setup_problem(exc) == "not_installed":
        raise exc
    log.warning("consumer %s: cannot read pgque.config (%s); no ticker", name, describe(exc))
    return False


def scheduler_absent(row: tuple[Any, ...] | None) -> bool:
    """Whether ``ticker="auto"`` runs a ticker, from the ``scheduler`` query's row:
    yes unless pgque.config shows a scheduler or its jobs."""
    return row is None or all(value is None for value in row[:3])


def ticker_source(source: object) -> Any:
    """What an in-process Ticker can connect with: a connection string or a (threaded)
    pool; None for an async pool or a connection (they carry the batches)."""
    return source if isinstance(source, (str, ConnectionPool)) else None


def ticker_wanted(setting: bool | str, row: tuple[Any, ...] | None) -> bool:
    """The ``ticker`` option decided: True/False as given, ``"auto"`` from the row."""
    return setting if isinstance(setting, bool) else scheduler_absent(row)
