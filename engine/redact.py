"""URLs as weir shows them: in logs, ``/jobs``, ``--help`` and error messages. A password in a
URL's userinfo (``user:pass@``) or in a query value whose name says it is a secret
(``sasl_password=``, ``ssl_key_password=``, ``token=``, …) becomes ``***``; the rest stays, so
the broker, topic and options a message names are still there to check."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

REDACTED = "***"
# query names whose values are secrets: a name that contains one of these words
_SECRET_NAME = re.compile(r"password|passwd|secret|token|credential", re.IGNORECASE)
# name=value pairs of a query string, by hand: parse_qsl + urlencode would re-quote the rest
_PAIR = re.compile(r"(?P<name>[^&=;]+)=(?P<value>[^&;]*)")


def is_secret_name(name: str) -> bool:
    """Whether an option or variable named ``name`` holds a secret (never shown)."""
    return _SECRET_NAME.search(name) is not None and not name.lower().endswith("_file")


def redact_url(url: str) -> str:
    """``url`` with its userinfo password and secret query values replaced by ``***``.

    A value that is not a URL comes back unchanged (a path, ``host:port``)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced [ in the host: show nothing of what follows
        return url.split("?", 1)[0].rsplit("@", 1)[-1]
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, sep, _password = userinfo.partition(":")
        netloc = f"{user}:{REDACTED}@{host}" if sep else f"{userinfo}@{host}"
    query = _PAIR.sub(_redact_pair, parts.query)
    if netloc == parts.netloc and query == parts.query:
        return url
    shown = f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else f"{netloc}{parts.path}"
    if query:
        shown += f"?{query}"
    if parts.fragment:
        shown += f"#{parts.fragment}"
    return shown


def _redact_pair(m: re.Match[str]) -> str:
    name = m.group("name")
    return f"{name}={REDACTED}" if is_secret_name(name) and m.group("value") else m.group(0)
