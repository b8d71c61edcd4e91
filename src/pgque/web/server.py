"""Running the console: uvicorn on a socket bound before it starts (so a taken port
is an error at once, and port 0 picks a free one), blocking or in a thread."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

import uvicorn

from pgque.web.app import create_app
from pgque.web.security import ConsoleSettings

__all__ = ["RunningConsole", "bind", "serve", "start_in_thread"]


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
    config = uvicorn.Config(
        create_app(settings), log_level="warning", lifespan="on", access_log=False
    )
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
