"""The console's guards: basic auth, CSRF tokens, allowed hosts, security headers.

- Basic auth (when a user and password are set) covers every request, with
  a constant-time comparison.
- Forms carry a CSRF token: an HMAC, under a secret made at start, of a
  random cookie (``SameSite=Strict``) the console sets; a POST whose token
  does not match its cookie is refused. The JSON API's POSTs instead need
  ``Content-Type: application/json``, which a cross-site page cannot send
  without a CORS preflight the console never grants.
- On a loopback address only loopback host names are answered (no DNS
  rebinding), and every response forbids scripts, framing and sniffing.
- A request body larger than ``max_body_bytes`` is refused (413) before it
  is read: by its ``Content-Length``, or, sent in chunks, as soon as it
  passes the bound.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pgque.errors import PgqueInvalidArgument

__all__ = [
    "CSRF_COOKIE",
    "ConsoleSettings",
    "Guard",
    "RequestTooLarge",
    "csrf_token",
    "loopback_hosts",
    "valid_csrf",
]

CSRF_COOKIE = "pgque_csrf"
_CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self';"
    " frame-ancestors 'none'; base-uri 'none'"
)
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


@dataclass
class ConsoleSettings:
    """How a console runs.

    Attributes:
        dsn: The database to show (libpq string or URI).
        allow_writes: Offer pause/resume and dead-letter replay and purge
            (the database role must allow them too).
        user: Basic-auth user; with ``password``, every request needs both.
        password: Basic-auth password.
        allowed_hosts: Host names answered (None: any), e.g. :func:`loopback_hosts`.
        secret: Key of the CSRF tokens (random per start unless given).
        max_body_bytes: Largest request body read (larger ones: 413, unread).
        request_timeout: Seconds a client has to send a whole request (its
            headers and body), counted from the connection or from the end
            of the previous response; a connection idle or slower than that
            is closed.
        lag_warning: Seconds behind at which a consumer with pending events
            gets a warning badge (shown beside the badge).
        refresh_seconds: The overview and queue pages reload themselves this
            often (0: never).

    Raises:
        PgqueInvalidArgument: A user without a non-empty password or a
            password without a user (as ``pgque web`` refuses them), or a
            bound that is not positive.
    """

    dsn: str
    allow_writes: bool = False
    user: str | None = None
    password: str | None = None
    allowed_hosts: list[str] | None = None
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    max_body_bytes: int = 1 << 20
    request_timeout: float = 10.0
    lag_warning: float = 300.0
    refresh_seconds: int = 10

    def __post_init__(self) -> None:
        if bool(self.user) != bool(self.password):
            raise PgqueInvalidArgument(
                "basic auth needs both a user and a non-empty password: give both, or"
                " neither (and then no credentials are asked for)"
            )
        for name in ("max_body_bytes", "request_timeout", "lag_warning"):
            value = getattr(self, name)
            if isinstance(value, bool) or not value > 0:
                raise PgqueInvalidArgument(f"{name} must be a positive number, got {value!r}")
        if isinstance(self.refresh_seconds, bool) or not self.refresh_seconds >= 0:
            raise PgqueInvalidArgument(
                f"refresh_seconds must be 0 (never) or more, got {self.refresh_seconds!r}"
            )

    @property
    def auth_required(self) -> bool:
        """Whether basic auth is on."""
        return bool(self.user) and bool(self.password)


class RequestTooLarge(Exception):
    """A request body passed ``max_body_bytes`` while it was read (answered 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the request body is larger than {limit} bytes, the most this console reads"
        )
        self.limit = limit


def loopback_hosts(host: str) -> list[str] | None:
    """The host names to answer when bound to ``host``: loopback names for a
    loopback address, None (any) otherwise."""
    return list(_LOOPBACK) if host in _LOOPBACK or host.startswith("127.") else None


def csrf_token(secret: bytes, cookie: str) -> str:
    """The form token belonging to a browser's CSRF cookie."""
    return hmac.new(secret, cookie.encode(), hashlib.sha256).hexdigest()


def valid_csrf(secret: bytes, cookie: str | None, token: str | None) -> bool:
    """Whether a form's token matches the cookie it came with."""
    if not cookie or not token:
        return False
    return hmac.compare_digest(csrf_token(secret, cookie), token)


def _same(given: bytes, expected: bytes) -> bool:
    # Digests first, so the comparison takes the same time whatever the lengths.
    return hmac.compare_digest(hashlib.sha256(given).digest(), hashlib.sha256(expected).digest())


class Guard:
    """ASGI middleware: allowed hosts, basic auth, security headers, the CSRF cookie."""

    def __init__(self, app: ASGIApp, settings: ConsoleSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse or pass the request on, adding the headers to its response."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(headers)
        if refusal is not None:
            await refusal(scope, receive, self._with_headers(send, None))
            return
        cookie = _cookie(headers.get("cookie", ""), CSRF_COOKIE)
        new_cookie = None if cookie else secrets.token_urlsafe(24)
        if new_cookie:
            scope.setdefault("state", {})["csrf_cookie"] = new_cookie
        await self.app(scope, self._bounded(receive), self._with_headers(send, new_cookie))

    def _bounded(self, receive: Receive) -> Receive:
        """``receive`` that raises :class:`RequestTooLarge` once the body passes the bound."""
        limit = self.settings.max_body_bytes
        seen = 0

        async def receiving() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise RequestTooLarge(limit)
            return message

        return receiving

    def _refusal(self, headers: Headers) -> PlainTextResponse | None:
        allowed = self.settings.allowed_hosts
        if allowed is not None:
            host = headers.get("host", "")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in allowed:
                return PlainTextResponse(
                    f"host {host!r} is not served: open the console as http://127.0.0.1",
                    status_code=400,
                )
        if self.settings.auth_required and not self._authorized(headers.get("authorization")):
            return PlainTextResponse(
                "authentication required: give the console's user and password",
                status_code=401,
                headers={"WWW-Authenticate": 'Basic realm="pgque", charset="UTF-8"'},
            )
        length = headers.get("content-length")
        limit = self.settings.max_body_bytes
        if length is not None and (not length.isdigit() or int(length) > limit):
            # Refused unread; the connection is closed, so the body never is.
            return PlainTextResponse(
                f"the request body is larger than {self.settings.max_body_bytes} bytes, the"
                " most this console reads",
                status_code=413,
                headers={"Connection": "close"},
            )
        return None

    def _authorized(self, header: str | None) -> bool:
        scheme, _, encoded = (header or "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, sep, password = base64.b64decode(encoded, validate=True).partition(b":")
        except (binascii.Error, ValueError):
            return False
        ok_user = _same(user, (self.settings.user or "").encode())
        ok_password = _same(password, (self.settings.password or "").encode())
        return bool(sep) and ok_user and ok_password

    def _with_headers(self, send: Send, new_cookie: str | None) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = list(message.get("headers", []))
                raw.extend(_security_headers())
                if new_cookie:
                    raw.append((
                        b"set-cookie",
                        f"{CSRF_COOKIE}={new_cookie}; Path=/; HttpOnly; SameSite=Strict".encode(),
                    ))  # fmt: skip
                message = {**message, "headers": raw}
            await send(message)

        return sending


def _security_headers() -> Iterable[tuple[bytes, bytes]]:
    return (
        (b"content-security-policy", _CSP.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"same-origin"),
        (b"cache-control", b"no-store"),
    )


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name and value:
            return value
    return None
