"""Watermarks over several inputs: an operator's watermark is the minimum over its non-idle input
channels (DESIGN.md, "Time"). The same rule combines a worker's source splits into its outgoing
watermark, and a receiver's input channels into its operators' watermark.

A record arriving on one input carries the watermark it was produced under; the watermark it
*arrives* under is that value combined with the other inputs' current ones: ``min(w, others)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK


def combine(values: list[int], others: int) -> list[int]:
    """``min(v, others)`` for each value (C-speed when ``others`` does not bind)."""
    if others == MAX_WATERMARK or not values or values[-1] <= others:
        return values
    return [v if v < others else others for v in values]


@dataclass(slots=True)
class Input:
    watermark: int = MIN_WATERMARK
    data_watermark: int = MIN_WATERMARK  # the last watermark real records produced
    idle: bool = False
    ended: bool = False


class Inputs:
    """The watermark state of a set of inputs (splits, or channels from workers)."""

    def __init__(self, names: list[str]) -> None:
        self.inputs = {n: Input() for n in names}

    @classmethod
    def of(cls, inputs: dict[str, Input]) -> Inputs:
        """A view over inputs another ``Inputs`` owns (they are shared, not copied): an
        operator's channels of the sources that feed it."""
        found = cls([])
        found.inputs = inputs
        return found

    def active(self) -> list[Input]:
        return [i for i in self.inputs.values() if not i.idle]

    def watermark(self) -> int:
        """Minimum over the active inputs; over all of them when every one is idle (operators
        never move their watermark back, so this cannot regress); MAX when there are none."""
        pool = self.active() or list(self.inputs.values())
        return min(i.watermark for i in pool) if pool else MAX_WATERMARK

    def data_watermark(self) -> int:
        """The same minimum over the watermarks real records produced (retention counts from
        it), leaving out inputs that ended without any data."""
        pool = [
            i
            for i in self.inputs.values()
            if not i.idle and not (i.ended and i.data_watermark == MIN_WATERMARK)
        ]
        return min(i.data_watermark for i in pool) if pool else MIN_WATERMARK

    def others(self, name: str) -> int:
        """The minimum over the active inputs other than ``name`` (MAX when there are none)."""
        marks = [i.watermark for n, i in self.inputs.items() if n != name and not i.idle]
        return min(marks) if marks else MAX_WATERMARK

    def all_ended(self) -> bool:
        return all(i.ended for i in self.inputs.values())
