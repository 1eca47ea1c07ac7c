"""Complex event processing, after Flink CEP: a pattern of events, matched per key in event
time::

    from weir.engine.cep import Pattern

    pattern = (
        Pattern.begin("login-failed").where(lambda e: e["kind"] == "fail").times(3)
        .followed_by("login").where(lambda e: e["kind"] == "ok")
        .within(60_000)
    )
    alerts = events.key_by("user").pattern(pattern).select(name="suspicious-logins")
    # {"key", "match": {"login-failed": [...], "login": [...]}, "ts"} per match

The pattern API (``pattern.py``, ``quantifier.py``, ``skip.py``) is Flink's: ``begin``,
``next``/``followed_by``/``followed_by_any``, ``not_next``/``not_followed_by``, ``where``,
``or_``, ``until``, ``times``, ``one_or_more``, ``optional``, ``greedy``, ``consecutive``,
``allow_combinations``, ``within`` and the after-match skip strategies. ``compiler.py`` turns
a pattern into Flink's NFA (``nfa.py``, ``buffer.py``, ``computation.py``), which
``function.py`` runs as a keyed process function: its state is keyed state, checkpointed,
rescaled by key groups and queryable at ``/{job}/{name}/state/{key}`` (``partial_matches``).
Late events go to the side output ``LATE``, timed-out partial matches to ``TIMED_OUT``.

A library over the job API, as Flink CEP is over the DataStream API: it imports the core and
binds ``KeyedStream.pattern`` when imported, which ``weir.engine`` does. The reference is
``docs/reference/cep.md``.
"""

from __future__ import annotations

from weir.engine.cep.function import LATE, TIMED_OUT, MatchContext, PatternFunction
from weir.engine.cep.pattern import GroupPattern, Pattern
from weir.engine.cep.quantifier import WithinType
from weir.engine.cep.skip import AfterMatchSkipStrategy, SkipError
from weir.engine.cep.stream import PatternStream, pattern, patterns_of
from weir.engine.streams import KeyedStream

KeyedStream.pattern = pattern  # type: ignore[method-assign]

__all__ = [
    "LATE",
    "TIMED_OUT",
    "AfterMatchSkipStrategy",
    "GroupPattern",
    "MatchContext",
    "Pattern",
    "PatternFunction",
    "PatternStream",
    "SkipError",
    "WithinType",
    "patterns_of",
]
