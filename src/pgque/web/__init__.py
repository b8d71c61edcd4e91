"""``pgque web``: a server-rendered console for operators, Prometheus metrics and a JSON API.

Needs the ``web`` extra (``pip install '.[web]'`` from the clone). Build the
application with :func:`create_app`, or run it with :func:`serve` (blocking)
or :func:`start_in_thread` (tests, ``pgque demo``). ``docs/web.md``
describes every page, endpoint, option and metric.
"""

from pgque.web.app import create_app
from pgque.web.security import ConsoleSettings, loopback_hosts
from pgque.web.server import RunningConsole, serve, start_in_thread

__all__ = [
    "ConsoleSettings",
    "RunningConsole",
    "create_app",
    "loopback_hosts",
    "serve",
    "start_in_thread",
]
