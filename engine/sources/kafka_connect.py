"""Connecting a Kafka client, for either library: retry with backoff while no broker answers, for
up to ``WEIR_KAFKA_CONNECT_TIMEOUT_S`` seconds (default 60); fail at once, naming what to fix,
when a broker answers but refuses the client's TLS or SASL (``kafka_diagnose``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from weir.base.errors import SourceError
from weir.base.settings import read_env
from weir.engine.kafka_security import CONNECT_TIMEOUT, KafkaSecurity

log = logging.getLogger(__name__)

CONNECT_BACKOFF_S = 0.5
T = TypeVar("T")
M = TypeVar("M")


def _check_broker(bootstrap: str, security: KafkaSecurity, what: str, first: bool) -> None:
    """Raise when the broker refuses this client's TLS or SASL: retrying would not heal it.

    A TLS client is checked before its first attempt too (once per process and settings):
    kafka-python's TLS handshake has no timeout, so a plaintext listener that waits for more
    bytes instead of closing would hold the attempt for ever."""
    from weir.engine.sources.kafka_diagnose import diagnose

    key = (bootstrap, security)
    if first and (not security.tls or key in _CHECKED):
        return
    reason = diagnose(bootstrap, security)
    if reason is not None:
        raise SourceError(f"{reason} (connecting for {what})")
    if first:
        _CHECKED.add(key)


_CHECKED: set[tuple[str, KafkaSecurity]] = set()


def retrying(
    attempt: Callable[[int], T],
    transient: tuple[type[BaseException], ...],
    what: str,
    bootstrap: str,
    security: KafkaSecurity,
) -> T:
    """``attempt(timeout_ms)`` until it returns, while it raises one of ``transient``."""
    budget: float = read_env(CONNECT_TIMEOUT)
    deadline = time.monotonic() + budget
    delay = CONNECT_BACKOFF_S
    _check_broker(bootstrap, security, what, first=True)
    tries = 0
    while True:
        tries += 1
        # each attempt waits at most half the budget left, so there is time to retry
        left_ms = (deadline - time.monotonic()) * 1000
        try:
            return attempt(int(max(500, min(5_000, left_ms / 2))))
        except transient as exc:
            _check_broker(bootstrap, security, what, first=False)
            left = deadline - time.monotonic()
            if left <= 0:
                raise SourceError(
                    f"cannot reach the Kafka broker at {bootstrap} for {what} "
                    f"({type(exc).__name__} after {tries} attempts in {budget:g} s); check the "
                    "host:port in the URL and that the broker is up"
                ) from None
            log.warning(
                "kafka broker %s unreachable for %s (attempt %d); retrying in %.1f s",
                bootstrap, what, tries, min(delay, left),
            )  # fmt: skip
            time.sleep(min(delay, left))
            delay = min(delay * 2, 8.0)


def kafka_python_client_kwargs(bootstrap: str, security: KafkaSecurity) -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        "request_timeout_ms": 15_000,
        "reconnect_backoff_ms": 100,
        "reconnect_backoff_max_ms": 2_000,
        **security.client_kwargs(),
    }


def connect(factory: Any, what: str, bootstrap: str, security: KafkaSecurity, **kwargs: Any) -> Any:
    """Build a kafka-python client (``factory``: ``KafkaConsumer``, ``KafkaProducer``…),
    retrying while no broker answers; ``kwargs`` may override the defaults (a sink's request
    timeout fits its delivery one)."""
    from kafka.errors import KafkaConfigurationError, KafkaError

    settings = {**kafka_python_client_kwargs(bootstrap, security), **kwargs}

    def attempt(timeout_ms: int) -> Any:
        try:
            return factory(**settings, bootstrap_timeout_ms=timeout_ms)
        except KafkaConfigurationError as exc:
            raise SourceError(f"Kafka client settings for {what}: {exc}") from None

    return retrying(attempt, (KafkaError,), what, bootstrap, security)


def cut_at(msgs: list[M], stop: int | None, offset_of: Callable[[M], int]) -> list[M]:
    """``msgs`` (in offset order) before offset ``stop``."""
    if stop is None or offset_of(msgs[-1]) < stop:
        return msgs
    return [m for m in msgs if offset_of(m) < stop]
