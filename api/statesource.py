"""Where an API answer's rows come from: the live secondary of the owning worker, or the
committed view of the latest checkpoint (``consistency=live|committed``)."""

from __future__ import annotations

from weir.api import keylist
from weir.api.errors import ApiError
from weir.api.registry import JobHandle
from weir.state import layout


class StateSource:
    """Where an answer's rows come from: the live secondary of the owning worker, or the
    committed view of the latest checkpoint."""

    def __init__(self, handle: JobHandle, consistency: str) -> None:
        self.view = None
        if consistency == "committed":
            self.view = handle.committed_view()
            if self.view is None:
                raise ApiError(
                    400,
                    "committed_unavailable",
                    f"consistency=committed reads the latest checkpoint, and job "
                    f"{handle.job.name!r} has none yet; run it with --checkpoint-interval-ms, or "
                    "use consistency=live",
                )
        self.handle = handle

    def scan(self, kg: int, prefix: bytes) -> list[tuple[bytes, bytes]]:
        return self.between(kg, prefix, layout.prefix_upper_bound(prefix))

    def between(self, kg: int, lo: bytes, hi: bytes) -> list[tuple[bytes, bytes]]:
        if self.view is not None:
            return self.view.scan(kg, lo, hi)
        return self.handle.reader_for(kg).scan(lo, hi)

    def ranges(self, kg: int, wanted: list[tuple[bytes, bytes]]) -> list[list[tuple[bytes, bytes]]]:
        """Each ``[lo, hi)`` of ``wanted`` in key group ``kg``, read from one reader (a point
        lookup reads its key's fine and coarse cells so)."""
        if self.view is not None:
            return [self.view.scan(kg, lo, hi) for lo, hi in wanted]
        return self.handle.reader_for(kg).scan_ranges(wanted)

    def iterator(self, kg: int, state_id: int) -> keylist.Seeker:
        """An iterator over one state's range in key group ``kg``, for a listing's seeks."""
        hi = layout.prefix_upper_bound(layout.state_prefix(kg, state_id))
        if self.view is not None:
            return self.view.iterator(kg, hi)
        return self.handle.reader_for(kg).iterator(hi)

    def as_of(self, op: str) -> tuple[int, int | None]:
        """The watermark and checkpoint the rows are as of."""
        if self.view is not None:
            return self.view.watermark, self.view.id
        return self.handle.runtime.state_watermark(op), self.handle.runtime.last_checkpoint


__all__ = ["StateSource"]
