"""``pgque web``: a server-rendered console for operators, Prometheus metrics and a JSON API.

Needs the ``web`` extra (``pip install '.[web]'`` from the clone). Build the
application with :func:`create_app`, or run it with :func:`serve` (blocking)
or :func:`start_in_thread` (tests, ``pgque demo``). ``docs/web.md``
describes every page, endpoint, option and metric.
"""

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:
    raise ImportError(
        f"pgque.web needs starlette, jinja2 and uvicorn ({exc}); install them from the"
        " pgque clone with: pip install '.[web]'"
    ) from exc

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
