"""Sources: ``sources.jsonl(path)``, ``sources.generator("ads", ...)``, or a URL.

URLs (``weir run --source URL``): a path or ``file:///path/events.jsonl``,
``generator://ads?rate=N&ids=N&skew=S&disorder=MS&seed=N&count=N&clock=wall|synthetic``,
``kafka://host:port/topic?group=NAME&start=earliest|latest|committed|<ms>&end=latest``, with
TLS and SASL options (``security_protocol=SASL_SSL&sasl_mechanism=SCRAM-SHA-512&…``, see
``engine/kafka_security.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from weir.base.errors import ConfigError, SourceError
from weir.base.lazy import exports, keep_functions
from weir.base.paths import file_path
from weir.base.redact import redact_url
from weir.engine.sources.base import Source, SourceBatch, SplitReader
from weir.engine.sources.file import JsonlSource

if TYPE_CHECKING:
    from weir.engine.kafka_security import KafkaSecurity
    from weir.engine.sources.generator import GeneratorSource
    from weir.engine.sources.kafka import KafkaSource

SCHEMES = ("file", "generator", "kafka")

# the generator and Kafka load with the first source of theirs (a file job needs neither):
# each name's module and attribute
_HOMES = {
    "GeneratorSource": "weir.engine.sources.generator:GeneratorSource",
    "KafkaSecurity": "weir.engine.kafka_security:KafkaSecurity",
    "KafkaSource": "weir.engine.sources.kafka:KafkaSource",
    "SECURITY_OPTIONS": "weir.engine.kafka_security:OPTIONS",
    "security_of": "weir.engine.kafka_security:security_of",
    "url_parts": "weir.engine.sources.kafka:url_parts",
}


def jsonl(path: str | Path) -> JsonlSource:
    """A bounded source reading one JSON object per line."""
    return JsonlSource(Path(path))


def generator(workload: str = "ads", **options: Any) -> GeneratorSource:
    """A synthetic workload (see ``engine.sources.generator``)."""
    from weir.engine.sources.generator import GeneratorSource

    if "splits" in options:
        options["split_count"] = options.pop("splits")
    try:
        return GeneratorSource(workload=workload, **options)
    except TypeError as exc:
        raise ConfigError(f"generator://{workload}: {exc}") from None


def kafka(
    bootstrap: str,
    topic: str,
    *,
    group: str | None = None,
    start: str | int = "earliest",
    end: str | None = None,
    metadata: bool = False,
    security: KafkaSecurity | None = None,
) -> KafkaSource:
    """A Kafka topic, one split per partition (see ``engine.sources.kafka``); ``security``
    defaults to the ``WEIR_KAFKA_*`` settings."""
    from weir.engine.kafka_security import KafkaSecurity
    from weir.engine.sources.kafka import KafkaSource

    sec = KafkaSecurity.from_env() if security is None else security
    return KafkaSource(bootstrap, topic, group, str(start), end, metadata, security=sec)


_KAFKA_OPTIONS = ("group", "start", "end", "metadata")


def _kafka_from_url(url: str) -> KafkaSource:
    from weir.engine.kafka_security import OPTIONS as SECURITY_OPTIONS
    from weir.engine.kafka_security import security_of
    from weir.engine.sources.kafka import url_parts

    found = url_parts(url)
    shown = redact_url(url)
    if found is None:
        raise ConfigError(f"source {shown!r}: use kafka://host:port/topic?group=NAME")
    bootstrap, topic, options = found
    unknown = sorted(set(options) - set(_KAFKA_OPTIONS) - set(SECURITY_OPTIONS))
    if unknown:
        raise ConfigError(
            f"source {shown!r}: unknown option {unknown[0]!r}; use "
            f"{', '.join(_KAFKA_OPTIONS + SECURITY_OPTIONS)}"
        )
    try:
        return kafka(
            bootstrap,
            topic,
            group=options.get("group") or None,
            start=options.get("start", "earliest"),
            end=options.get("end") or None,
            metadata=options.get("metadata", "false").lower() in ("1", "true", "yes"),
            security=security_of(url, options),
        )
    except SourceError as exc:
        raise ConfigError(f"source {shown!r}: {exc}") from None


_GEN_TYPES: dict[str, type] = {
    "rate": float,
    "ids": int,
    "skew": float,
    "disorder": int,
    "seed": int,
    "count": int,
    "clicks": float,
    "clock": str,
    "start": int,
    "step": float,
    "splits": int,
}


def from_url(url: str) -> Source:
    """Parse a source URL or a path (a JSONL file, or a glob of them); the error names the bad
    part and the accepted forms."""
    path = file_path(url, "source")
    if path is not None:
        return jsonl(path)
    parts = urlsplit(url)
    if parts.scheme == "kafka":
        return _kafka_from_url(url)
    if parts.scheme == "generator":
        options: dict[str, Any] = {}
        for name, raw in parse_qsl(parts.query, keep_blank_values=True):
            kind = _GEN_TYPES.get(name)
            if kind is None:
                raise ConfigError(
                    f"source {url!r}: unknown option {name!r}; use {', '.join(sorted(_GEN_TYPES))}"
                )
            try:
                options[name] = kind(raw)
            except ValueError:
                raise ConfigError(
                    f"source {url!r}: option {name}={raw!r} is not a {kind.__name__}"
                ) from None
        return generator(parts.netloc or "ads", **options)
    raise ConfigError(
        f"unknown source scheme {parts.scheme or '(none)'!r} in {redact_url(url)!r}; "
        f"use one of {', '.join(s + '://' for s in SCHEMES)}"
    )


__getattr__, __dir__ = exports(__name__, _HOMES)


# ``kafka()`` and ``generator()`` share their names with the submodules imported late above
keep_functions(__name__)

__all__ = [
    "GeneratorSource",
    "JsonlSource",
    "KafkaSource",
    "Source",
    "SourceBatch",
    "SplitReader",
    "from_url",
    "generator",
    "jsonl",
    "kafka",
]
