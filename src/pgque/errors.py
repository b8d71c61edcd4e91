"""Exceptions raised by pgque.

Every error pgque raises on purpose derives from :class:`PgqueError`; driver
errors are wrapped and chained (``raise ... from exc``), so the original
psycopg exception stays available as ``__cause__``::

    Exception
     +-- PgqueError
          +-- PgqueConnectionError
          +-- PgqueNotInstalledError
          +-- PgqueInstallError
"""

from __future__ import annotations

__all__ = [
    "PgqueConnectionError",
    "PgqueError",
    "PgqueInstallError",
    "PgqueNotInstalledError",
]


class PgqueError(Exception):
    """A pgque operation failed."""

    def __init__(self, *args: object) -> None:
        """Create the error; without arguments the class docstring is the message."""
        if not args:
            doc = type(self).__doc__ or ""
            args = (doc.strip().splitlines()[0] if doc.strip() else type(self).__name__,)
        super().__init__(*args)


class PgqueConnectionError(PgqueError):
    """The database connection is unusable."""


class PgqueNotInstalledError(PgqueError):
    """The pgque schema is not installed in this database."""


class PgqueInstallError(PgqueError):
    """Installing or uninstalling the pgque schema failed."""


for _cls in (PgqueError, PgqueConnectionError, PgqueNotInstalledError, PgqueInstallError):
    _cls.__module__ = "pgque"
del _cls
