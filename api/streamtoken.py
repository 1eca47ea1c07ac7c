"""Short-lived stream tokens: how a page opens an event stream of an API that has a token.

A browser's ``EventSource`` cannot send ``Authorization``. A client that holds the API token asks
``POST /auth/stream-token`` for a token that opens the ``/stream`` routes (of one job, or of all)
until it expires, and passes it as ``?access_token=``. A token is ``v1.<expires ms>.<scope>.<mac>``:
an HMAC-SHA256 of the expiry and the scope (a path prefix) keyed by a secret derived from the API
token, so no state is kept, a new API token revokes every stream token, and one cannot be
forged or widened without the API token. It never opens another route, and ``api.app`` strips it
from the request's query string before anything (uvicorn's access log too) can record it.

A *read* token (``POST /auth/stream-token?reads=true``, ``r1.…``, the kind named in its MAC) also
opens every read route (``GET``/``HEAD``, never an admin route) as ``Authorization: Bearer
<token>``: the dashboard trades the API token typed into it for one, keeps only that in the
page's memory (no storage a later page of the same origin could read) and forgets the API token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

PARAM = "access_token"
DEFAULT_TTL_S = 300
MAX_TTL_S = 3_600
_VERSION = "v1"
_READS = "r1"  # a read token: the stream token's format, a kind of its own in the MAC


class Refused(Exception):
    """A stream token that does not open this path: ``code`` and a message naming the fix."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def scope_of(job: str | None) -> str:
    """The path prefix a token opens: one job's routes, or every route."""
    return f"/{job}/" if job else "/"


@dataclass(frozen=True, slots=True)
class StreamKeys:
    """Signs and checks stream tokens with a key derived from the API token (never the token
    itself, so a stream token reveals nothing about it)."""

    secret: bytes

    @classmethod
    def from_api_token(cls, token: str) -> StreamKeys:
        return cls(hmac.new(token.encode(), b"weir stream token", hashlib.sha256).digest())

    def _mac(self, version: str, expires_ms: int, scope: str) -> bytes:
        message = f"{version}\n{expires_ms}\n{scope}".encode()
        return hmac.new(self.secret, message, hashlib.sha256).digest()

    def issue(
        self, job: str | None, ttl_s: int, now: float | None = None, *, reads: bool = False
    ) -> tuple[str, int]:
        """A token for ``job``'s streams (all streams when None) and its expiry, epoch ms;
        with ``reads``, a read token that opens ``job``'s read routes too."""
        expires_ms = int(((now if now is not None else time.time()) + ttl_s) * 1000)
        scope = scope_of(job)
        version = _READS if reads else _VERSION
        mac = self._mac(version, expires_ms, scope)
        return f"{version}.{expires_ms}.{_b64(scope.encode())}.{_b64(mac)}", expires_ms

    def check(
        self, token: str, path: str, now: float | None = None, *, reads: bool = False
    ) -> None:
        """Raises ``Refused`` unless ``token`` is one of ours, unexpired, for ``path``; with
        ``reads`` (a read route, not a stream), only a read token will do."""
        try:
            version, expires, scope_b64, mac_b64 = token.split(".")
            expires_ms, scope, mac = int(expires), _unb64(scope_b64).decode(), _unb64(mac_b64)
        except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors too
            raise _forged() from None
        kinds = (_READS,) if reads else (_VERSION, _READS)
        if version not in kinds or not hmac.compare_digest(
            mac, self._mac(version, expires_ms, scope)
        ):
            raise _forged()
        if expires_ms < (now if now is not None else time.time()) * 1000:
            raise Refused(
                "stream_token_expired",
                f"this stream token expired at {expires_ms} (epoch ms); ask "
                "POST /auth/stream-token for a new one",
            )
        if not path.startswith(scope):
            raise Refused(
                "stream_token_scope",
                f"this stream token opens the streams under {scope!r} only, not {path!r}; ask "
                "POST /auth/stream-token?job=<that job> for one",
            )


def _forged() -> Refused:
    return Refused(
        "invalid_stream_token",
        "access_token is not a stream token this API gave out (or the API token changed "
        "since); ask POST /auth/stream-token for one",
    )


def is_read_token(authorization: bytes) -> bool:
    """Does an ``Authorization`` header carry a read token (rather than the API token)?"""
    return authorization.startswith(f"Bearer {_READS}.".encode())


def take(query_string: bytes) -> tuple[str | None, bytes]:
    """The ``access_token`` of a query string, and the query string without it."""
    if PARAM.encode() not in query_string:
        return None, query_string
    pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    token = next((v for k, v in pairs if k == PARAM), None)
    rest = urlencode([(k, v) for k, v in pairs if k != PARAM])
    return token, rest.encode("latin-1")
