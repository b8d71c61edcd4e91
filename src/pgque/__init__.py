"""pgque: a PostgreSQL queue built on PgQ's design, in plain PL/pgSQL.

Install the schema into a database with :func:`install`; the SQL ships inside
this package as one file (``pgque/sql/pgque.sql``).
"""

from pgque._version import __version__
from pgque.errors import (
    PgqueConnectionError,
    PgqueError,
    PgqueInstallError,
    PgqueNotInstalledError,
)
from pgque.installer import install, installed_version, uninstall

__all__ = [
    "PgqueConnectionError",
    "PgqueError",
    "PgqueInstallError",
    "PgqueNotInstalledError",
    "__version__",
    "install",
    "installed_version",
    "uninstall",
]
