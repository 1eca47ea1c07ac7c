"""URLs and settings as weir shows them: in logs, ``/jobs``, ``/health``, ``--help`` and error
messages. A password in a URL's userinfo (``user:pass@``) or in a query value whose name says it
is a secret (``sasl_password=``, ``ssl_key_password=``, ``token=``, …) becomes ``***``; the rest
stays, so the broker, topic and options a message names are still there to check.
``redact_setting`` does the same for a ``KEY=VALUE`` setting (``spark.authenticate.secret=…``)
and ``redact_text`` for free text that may quote either (a library's error message)."""

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
    folded = name.lower()
    return _SECRET_NAME.search(name) is not None and not folded.endswith(("_file", ".file"))


def redact_setting(item: str) -> str:
    """``KEY=VALUE`` with the value replaced by ``***`` when ``KEY`` names a secret; anything
    else as ``redact_url`` shows it.

    Example:
        >>> redact_setting("spark.authenticate.secret=hunter2")
        'spark.authenticate.secret=***'
    """
    key, eq, value = item.partition("=")
    if eq and value and "://" not in key and is_secret_name(key):
        return f"{key}={REDACTED}"
    return redact_url(item)


# a URL in free text (up to whitespace or a quote), and a secret-named NAME=VALUE or NAME: VALUE
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_SECRET_PAIR_IN_TEXT = re.compile(
    r"(?P<name>[A-Za-z_][\w.-]*)(?P<sep>=|: )(?P<value>[^\s&;,'\")\]]+)"
)


def redact_text(text: str) -> str:
    """``text`` (a message, perhaps quoting a URL or a setting) with every URL's password and
    every secret-named ``name=value`` replaced by ``***``.

    Example:
        >>> redact_text("cannot reach http://me:pw@10.0.0.1:8333 (token=abc)")
        'cannot reach http://me:***@10.0.0.1:8333 (token=***)'
    """
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)
    return _SECRET_PAIR_IN_TEXT.sub(_redact_text_pair, text)


def _redact_text_pair(m: re.Match[str]) -> str:
    if not is_secret_name(m.group("name")) or m.group("value") == REDACTED:
        return m.group(0)
    return f"{m.group('name')}{m.group('sep')}{REDACTED}"


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
