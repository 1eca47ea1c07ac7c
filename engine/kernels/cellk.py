"""Pure-Python twin of the cell kernels (``_cellk.pyx``): a key's rows in the cells of its
bucket, each cell searched in place (``weir.state.cells``), and packed rows written as cells
with numpy (``weir.state.cellcodec.encode_packed``)."""

from __future__ import annotations

from weir.state.cellcodec import encode_packed
from weir.state.cells import find_windows

__all__ = ["encode_packed", "find_windows"]
