"""Exceptions raised by pgque.

Every error pgque raises on purpose derives from :class:`PgqueError`; driver
errors are wrapped and chained (``raise ... from exc``), so the original
psycopg exception stays available as ``__cause__``::

    Exception
     +-- PgqueError
          +-- PgqueConnectionError
          +-- PgquePoolerError
          +-- PgqueNotInstalledError
          +-- PgqueInstallError
          +-- ConsumerGaveUp
          +-- PgqueQueueNotFound
          +-- PgqueConsumerNotFound
          +-- PgqueBatchNotFound
          +-- PgqueMessageNotFound
          +-- PgqueInvalidArgument
          +-- PgqueOperationRefused
          |    +-- PgqueInsertDisallowed
          |    +-- PgqueTickRefused
          |    +-- PgqueWrongConsumerKind
          |    +-- PgqueFenced
          |    +-- PgqueSchedulerUnavailable
          |    +-- PgqueTriggerRefused
          +-- PgqueCorruption
          +-- PgqueTickerFailed
          +-- PgqueMaintFailed
          +-- PgqueAssertionFailed

The SQL functions put a stable code in each error's DETAIL
(``pgque:queue_not_found`` ...); :func:`from_database_error` maps it to a
class through one table (``_BY_CODE``, which ``tests/test_error_codes.py``
holds equal to the codes the SQL raises), and falls back to the message texts
upstream PgQue's client matches, so the mapping also works against upstream's
SQL. PostgreSQL's own data exceptions (SQLSTATE class 22: a value that does
not cast, is out of range or cannot be stored, such as a NUL character in
text) are :class:`PgqueInvalidArgument`. The symptoms of a transaction-mode
pooler met without ``pooler=True`` (a prepared statement of psycopg's missing
or already there on the server session the pooler lent) are
:class:`PgquePoolerError`.
"""

from __future__ import annotations

import psycopg

__all__ = [
    "ConsumerGaveUp",
    "PgqueAssertionFailed",
    "PgqueBatchNotFound",
    "PgqueConnectionError",
    "PgqueConsumerNotFound",
    "PgqueCorruption",
    "PgqueError",
    "PgqueFenced",
    "PgqueInsertDisallowed",
    "PgqueInstallError",
    "PgqueInvalidArgument",
    "PgqueMaintFailed",
    "PgqueMessageNotFound",
    "PgqueNotInstalledError",
    "PgqueOperationRefused",
    "PgquePoolerError",
    "PgqueQueueNotFound",
    "PgqueSchedulerUnavailable",
    "PgqueTickRefused",
    "PgqueTickerFailed",
    "PgqueTriggerRefused",
    "PgqueWrongConsumerKind",
    "from_database_error",
]


class PgqueError(Exception):
    """A pgque operation failed."""

    #: The SQLSTATE of the database error behind this one, if any.
    sqlstate: str | None = None
    #: The stable pgque code from the error's DETAIL (``queue_not_found`` ...), if any.
    code: str | None = None
    #: The database error's HINT (what to do about it), if any.
    hint: str | None = None

    def __init__(self, *args: object) -> None:
        """Create the error; without arguments the class docstring is the message."""
        if not args:
            doc = type(self).__doc__ or ""
            args = (doc.strip().splitlines()[0] if doc.strip() else type(self).__name__,)
        super().__init__(*args)


class PgqueConnectionError(PgqueError):
    """The database connection is unusable."""


class PgquePoolerError(PgqueError):
    """A transaction-mode pooler (PgBouncer, Supavisor, RDS Proxy) is between the SDK and
    the server: pass ``pooler=True`` (docs/operations.md, "Poolers")."""


POOLER_ADVICE = (
    "a transaction-mode connection pooler (PgBouncer, Supavisor, RDS Proxy) seems to be"
    " between this client and PostgreSQL: pass pooler=True to the Producer, Consumer,"
    " MultiQueueConsumer's consumers or Ticker (no prepared statements, no session state,"
    " no LISTEN through the pooler; give listen_dsn= for wakeups), or connect to the"
    ' server directly; see docs/operations.md, "Poolers"'
)
"""What a :class:`PgquePoolerError` says to do (after what the server said)."""


class PgqueNotInstalledError(PgqueError):
    """The pgque schema is not installed in this database."""


class PgqueInstallError(PgqueError):
    """Installing or uninstalling the pgque schema failed."""


class ConsumerGaveUp(PgqueError):
    """A consumer cannot go on (handler threads that will not stop, or batches it
    cannot settle): see the message, then restart it."""


class ConnectionAbandoned(PgqueConnectionError):
    """Internal: a transactional handler outlived its timeout, so the batch's
    connection was closed under it (the batch rolls back) and the consumer reconnects."""


class PgqueQueueNotFound(PgqueError):
    """The queue does not exist."""


class PgqueConsumerNotFound(PgqueError):
    """The consumer is not subscribed to the queue."""


class PgqueBatchNotFound(PgqueError):
    """The batch is not open (unknown, already acked, or taken over)."""


class PgqueMessageNotFound(PgqueError):
    """The message (or dead letter) is not where it was looked for."""


class PgqueInvalidArgument(PgqueError):
    """An argument was refused: a bad name, value, length or type."""


class PgqueOperationRefused(PgqueError):
    """The call is well-formed, but the queue's or consumer's state forbids it."""


class PgqueInsertDisallowed(PgqueOperationRefused):
    """The queue refuses new events (its disable_insert setting is on)."""


class PgqueTickRefused(PgqueOperationRefused):
    """The queue cannot be ticked this way (paused, external ticker, isolation level)."""


class PgqueWrongConsumerKind(PgqueOperationRefused):
    """The consumer is of a kind this call does not serve (cooperative, partition slot)."""


class PgqueFenced(PgqueOperationRefused):
    """This worker does not hold the partition slot's lease (never claimed, expired or taken)."""


class PgqueSchedulerUnavailable(PgqueOperationRefused):
    """The scheduler (pg_cron or pg_timetable) is missing, too old or not trusted."""


class PgqueTriggerRefused(PgqueOperationRefused):
    """A CDC trigger refused the row change (its arguments, the table's key, or the change)."""


class PgqueCorruption(PgqueError):
    """pgque's bookkeeping is damaged: a missing tick or object, or txids that went backwards."""


class PgqueTickerFailed(PgqueError):
    """A ticker loop ran, but ticking failed in some of its rounds."""


class PgqueMaintFailed(PgqueError):
    """run_maint() ran, but some of its maintenance operations failed."""


class PgqueAssertionFailed(PgqueError):
    """A pgque SQL test helper's assertion failed."""


# Every code the SQL raises, and its class. tests/test_error_codes.py fails when
# the SQL raises a code missing here, or when a code here is raised nowhere.
_BY_CODE: dict[str, type[PgqueError]] = {
    "queue_not_found": PgqueQueueNotFound,
    "consumer_not_found": PgqueConsumerNotFound,
    "batch_not_found": PgqueBatchNotFound,
    "event_not_found": PgqueMessageNotFound,
    "dead_letter_not_found": PgqueMessageNotFound,
    "invalid_argument": PgqueInvalidArgument,
    "tick_not_found": PgqueInvalidArgument,
    "consumers_attached": PgqueOperationRefused,
    "no_ticks": PgqueOperationRefused,
    "not_owner": PgqueOperationRefused,
    "staging_incomplete": PgqueOperationRefused,
    "insert_disallowed": PgqueInsertDisallowed,
    "ticker_paused": PgqueTickRefused,
    "external_ticker": PgqueTickRefused,
    "not_external_ticker": PgqueTickRefused,
    "wrong_isolation": PgqueTickRefused,
    "cooperative_consumer": PgqueWrongConsumerKind,
    "partition_slot": PgqueWrongConsumerKind,
    "fenced": PgqueFenced,
    "not_leased": PgqueFenced,
    "scheduler_missing": PgqueSchedulerUnavailable,
    "scheduler_too_old": PgqueSchedulerUnavailable,
    "scheduler_untrusted": PgqueSchedulerUnavailable,
    "trigger_bad_setup": PgqueTriggerRefused,
    "trigger_bad_argument": PgqueTriggerRefused,
    "trigger_bad_expression": PgqueTriggerRefused,
    "trigger_no_pkey": PgqueTriggerRefused,
    "trigger_pkey_update": PgqueTriggerRefused,
    "trigger_null_key": PgqueTriggerRefused,
    "trigger_denied": PgqueTriggerRefused,
    "corruption": PgqueCorruption,
    "invalid_state": PgqueCorruption,
    "ticker_failed": PgqueTickerFailed,
    "maint_failed": PgqueMaintFailed,
    "assertion_failed": PgqueAssertionFailed,
}

# Upstream PgQue raises bare texts; its client matches these substrings,
# ignoring case, in this order.
_BY_TEXT: tuple[tuple[str, type[PgqueError]], ...] = (
    ("queue not found", PgqueQueueNotFound),
    ("consumer not registered", PgqueConsumerNotFound),
    ("consumer not found", PgqueConsumerNotFound),
    ("not subscriber to queue", PgqueConsumerNotFound),
    ("batch not found", PgqueBatchNotFound),
    ("cannot find data for batch", PgqueBatchNotFound),
)


def pooler_symptom(exc: BaseException) -> bool:
    """Whether ``exc`` is what a transaction-mode pooler does to a client that prepares
    statements: psycopg's prepared statement (``_pg3_<n>``) missing (SQLSTATE 26000) or
    already there (42P05) on the server session the pooler lent, or one of another
    client bound with this one's parameters (08P01: a parameter count that differs)."""
    if not isinstance(exc, psycopg.Error):
        return False
    text = exc.diag.message_primary or str(exc)
    if exc.sqlstate in ("26000", "42P05"):
        return '"_pg3_' in text
    return exc.sqlstate == "08P01" and "bind message supplies" in text


def pooler_error(exc: BaseException) -> PgquePoolerError:
    """The :class:`PgquePoolerError` for a pooler's symptom ``exc`` (raise it ``from exc``)."""
    lines = str(exc).strip().splitlines()
    error = PgquePoolerError(f"{lines[0] if lines else type(exc).__name__}: {POOLER_ADVICE}")
    if isinstance(exc, psycopg.Error):
        error.sqlstate = exc.sqlstate
    return error


def _class_for(exc: psycopg.Error) -> tuple[type[PgqueError], str | None]:
    if pooler_symptom(exc):
        return PgquePoolerError, None
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return PgqueConnectionError, None
    cls, code = _class_for_fields(
        exc.diag.message_primary or str(exc), exc.diag.message_detail, exc.sqlstate
    )
    # psycopg's own refusal of a value (a NUL in text) never reaches the server
    # and so has no SQLSTATE.
    if cls is PgqueError and exc.sqlstate is None and isinstance(exc, psycopg.DataError):
        return PgqueInvalidArgument, None
    return cls, code


def _class_for_fields(
    message: str, detail: str | None, sqlstate: str | None
) -> tuple[type[PgqueError], str | None]:
    """The class (and pgque code) of a server error, from its fields."""
    detail = detail or ""
    if detail.startswith("pgque:"):
        code = detail[len("pgque:") :].split()[0]
        # A code this package does not know (a newer server-side pgque): the
        # code is kept on the error, the class says no more than that.
        return _BY_CODE.get(code, PgqueError), code
    text = message.lower()
    for needle, cls in _BY_TEXT:
        if needle in text:
            return cls, None
    # Data exceptions: a value that does not cast, is out of range or cannot be stored.
    if (sqlstate or "").startswith("22"):
        return PgqueInvalidArgument, None
    return PgqueError, None


def from_error_fields(
    message: str, *, detail: str | None = None, sqlstate: str | None = None,
    hint: str | None = None,
) -> PgqueError:  # fmt: skip
    """The pgque error for a server error known by its fields, from a driver other than
    psycopg (the Spark connector's ADBC reads); mapped as :func:`from_database_error`
    maps psycopg's."""
    cls, code = _class_for_fields(message, detail, sqlstate)
    error = cls(message)
    error.sqlstate = sqlstate
    error.code = code
    error.hint = hint
    return error


def from_database_error(exc: psycopg.Error) -> PgqueError:
    """Return the pgque error for a psycopg error (the caller raises it ``from exc``).

    The class comes from the ``pgque:<code>`` in the error's DETAIL, else from
    upstream PgQue's message texts; anything else is a plain :class:`PgqueError`.
    """
    cls, code = _class_for(exc)
    if cls is PgquePoolerError:
        return pooler_error(exc)
    message = exc.diag.message_primary or str(exc).strip()
    if exc.sqlstate == "3F000" and '"pgque"' in message:  # schema "pgque" does not exist
        cls = PgqueNotInstalledError
        message += (
            ": pgque is not installed in this database; run `pgque install`"
            " (or pgque.install(conn)) with an owner role"
        )
    error = cls(message)
    error.sqlstate = exc.sqlstate
    error.code = code
    error.hint = exc.diag.message_hint
    return error


for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = "pgque"
del _name, _obj
