"""Base classes for broadcast process functions (Flink's ``KeyedBroadcastProcessFunction``).
Subclassing is optional: any object with these methods will do; the base class only says what
each side may do, and fails clearly when a method was not overridden.

    class Limits(KeyedBroadcastProcessFunction):
        def process_broadcast_element(self, rule, ctx):    # on every worker
            ctx.broadcast_state("limits").put(rule["kind"], rule["limit"])

        def process_element(self, event, ctx):              # per key
            limit = ctx.broadcast_state("limits").get(event["kind"])
            if limit is not None and event["value"] > limit:
                ctx.emit({"key": ctx.key, "ts": ctx.timestamp, "over": event["value"] - limit})

    events.key_by("id").connect(rules.broadcast("limits")).process(Limits(), name="limits")
"""

from __future__ import annotations

from typing import Any


class KeyedBroadcastProcessFunction:
    """A keyed process function with a broadcast input.

    ``process_element(event, ctx)``: a record of the keyed input. ``ctx`` is a keyed process
    function's (``key``, ``timestamp``, ``watermark``, ``value``/``list``/``map`` state,
    timers, ``emit``, ``output``) plus ``broadcast_state(name)``, read-only.

    ``process_broadcast_element(event, ctx)``: a record of the broadcast input, on every
    worker. ``ctx`` has ``timestamp``, ``watermark``, ``broadcast_state(name)`` (writable:
    ``put``, ``put_all``, ``remove``, ``clear``), ``apply_to_keyed_state(name, fn)`` (``fn(key,
    state)`` for every key of this worker holding keyed state ``name``), ``emit`` and
    ``output``. There is no current key: no keyed state, no timers. What it emits, every
    worker emits.

    ``on_timer(timestamp, ctx)`` (optional): a timer set by ``process_element``; ``ctx`` as
    there."""

    def process_element(self, event: Any, ctx: Any) -> None:
        """Override: called with each record of the other input; reads the broadcast state.

        Raises:
            NotImplementedError: not overridden.
        """
        raise NotImplementedError(
            f"{type(self).__qualname__}: override process_element(event, ctx), which gets the "
            "keyed input's records"
        )

    def process_broadcast_element(self, event: Any, ctx: Any) -> None:
        """Override: called on every worker with each broadcast record; writes the broadcast
        state (``ctx.broadcast_state(name)``).

        Raises:
            NotImplementedError: not overridden.
        """
        raise NotImplementedError(
            f"{type(self).__qualname__}: override process_broadcast_element(event, ctx), which "
            "gets the broadcast input's records"
        )


class BroadcastProcessFunction:
    """A broadcast process function on a non-keyed stream (Flink's
    ``BroadcastProcessFunction``): ``stream.connect(rules.broadcast(...)).process(fn,
    name=...)``.

    ``process_element(event, ctx)``: a record of the non-keyed stream, on the worker that read
    it. ``ctx`` has ``timestamp``, ``watermark``, ``broadcast_state(name)`` (read-only),
    ``emit`` and ``output``; no key, so no keyed state and no timers.

    ``process_broadcast_element(event, ctx)``: as a keyed broadcast function's, without
    ``apply_to_keyed_state``."""

    def process_element(self, event: Any, ctx: Any) -> None:
        """Override: called with each record of the other input; reads the broadcast state.

        Raises:
            NotImplementedError: not overridden.
        """
        raise NotImplementedError(
            f"{type(self).__qualname__}: override process_element(event, ctx), which gets the "
            "non-keyed input's records"
        )

    def process_broadcast_element(self, event: Any, ctx: Any) -> None:
        """Override: called on every worker with each broadcast record; writes the broadcast
        state (``ctx.broadcast_state(name)``).

        Raises:
            NotImplementedError: not overridden.
        """
        raise NotImplementedError(
            f"{type(self).__qualname__}: override process_broadcast_element(event, ctx), which "
            "gets the broadcast input's records"
        )


__all__ = ["BroadcastProcessFunction", "KeyedBroadcastProcessFunction"]
