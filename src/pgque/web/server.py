"""Running the console: uvicorn on a socket bound before it starts (so a taken port
is an error at once, and port 0 picks a free one), blocking or in a thread.

uvicorn closes an idle keep-alive connection, but not one that never finishes
its request: :class:`DeadlineH11Protocol` gives every request a deadline
(``ConsoleSettings.request_timeout``) from the connection, or from the end of
the previous response, to the last byte of its body, and closes the
connection when it passes, so slow or silent clients cannot hold sockets.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from pgque.web.app import create_app
from pgque.web.security import ConsoleSettings

__all__ = ["DeadlineH11Protocol", "RunningConsole", "bind", "serve", "start_in_thread"]


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on reading each request."""

    #: Seconds a client has to send a whole request (set per server by :func:`_server`).
    request_timeout = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the first request's deadline."""
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the deadline with the connection."""
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        """Read what arrived; a request read whole stops its deadline."""
        super().handle_events()
        if self._deadline is not None and self.conn.their_state in (h11.DONE, h11.MUST_CLOSE):
            self._disarm()

    def on_response_complete(self) -> None:
        """The next request on this connection gets a deadline of its own."""
        self._arm()  # before: a pipelined request read by the call below stops it again
        super().on_response_complete()


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv6 when ``host`` holds a colon).

    Raises:
        OSError: The address is taken or not local.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def url_of(sock: socket.socket) -> str:
    """The console's address on a bound socket."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def _server(settings: ConsoleSettings) -> uvicorn.Server:
    protocol = type(
        "ConsoleH11Protocol", (DeadlineH11Protocol,), {"request_timeout": settings.request_timeout}
    )
    config = uvicorn.Config(
        create_app(settings), log_level="warning", lifespan="on", access_log=False,
        http=protocol, timeout_keep_alive=max(1, min(5, int(settings.request_timeout))),
    )  # fmt: skip
    return uvicorn.Server(config)


def serve(settings: ConsoleSettings, sock: socket.socket) -> None:
    """Serve the console on ``sock`` until Ctrl-C or SIGTERM."""
    _server(settings).run(sockets=[sock])


@dataclass
class RunningConsole:
    """A console served from a thread: its address; :meth:`stop` ends it."""

    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and wait for the thread."""
        self.server.should_exit = True
        self.thread.join(timeout)


def start_in_thread(
    settings: ConsoleSettings, host: str = "127.0.0.1", port: int = 0, timeout: float = 15.0
) -> RunningConsole:
    """Serve the console from a daemon thread; returns once it accepts requests.

    Raises:
        OSError: The address is taken.
        RuntimeError: The server did not start within ``timeout`` seconds.
    """
    sock = bind(host, port)
    url = url_of(sock)
    server = _server(settings)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="pgque-web", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"the console did not start on {url} within {timeout:g} s")
        time.sleep(0.02)
    return RunningConsole(url=url, server=server, thread=thread)
