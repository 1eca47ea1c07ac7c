"""What an operator gives: its results and side outputs, to be routed to sinks."""

from __future__ import annotations

from weir.base.errors import JobDefinitionError
from weir.engine.nodes import OutputTag, ProcessNode, WindowNode
from weir.engine.sinks import Sink


class ResultStream:
    """The output of an operator: window results ``{"op", "key", "start", "end",
    <aggregates>, "final"}`` (``op`` the operator's name), or what a process function emits."""

    def __init__(self, op: WindowNode | ProcessNode) -> None:
        self.operator = op

    def sink(self, sink: Sink) -> ResultStream:
        """Also write the operator's results to ``sink`` (its state is queryable anyway).

        Args:
            sink: e.g. ``sinks.jsonl("/tmp/out.jsonl")``; ``weir run --sink`` replaces it.

        Returns:
            This stream, so several sinks can follow.
        """
        self.operator.sinks.append(sink)
        return self

    def side_output(self, tag: OutputTag) -> SideOutputStream:
        """The records the process function writes with ``ctx.output(tag, record)`` (Flink's
        ``getSideOutput``). Declaring the tag is what lets the function use it; with no
        ``.sink(...)`` they go to ``side-<operator>-<tag>.jsonl`` in the job's directory."""
        op = self.operator
        if not isinstance(op, ProcessNode):
            raise JobDefinitionError(
                f"side_output({tag!r}) on window operator {op.name!r}: side outputs come from "
                "process functions (ctx.output); a window's late records have their own output "
                "(`late_sink_url`)"
            )
        if not isinstance(tag, OutputTag):
            raise JobDefinitionError(
                f"side_output({tag!r}): pass an OutputTag, e.g. OutputTag('alerts')"
            )
        op.side_outputs.setdefault(tag.name, [])
        return SideOutputStream(op, tag)


class SideOutputStream:
    """One side output of a process function, to be routed to sinks."""

    def __init__(self, op: ProcessNode, tag: OutputTag) -> None:
        self.operator = op
        self.tag = tag

    def sink(self, sink: Sink) -> SideOutputStream:
        """Write this side output's records to ``sink`` instead of its default file,
        ``<state-dir>/<job>/side-<operator>-<tag>.jsonl``.

        Args:
            sink: where the side output's records go.

        Returns:
            This stream, so several sinks can follow.
        """
        self.operator.side_outputs[self.tag.name].append(sink)
        return self
