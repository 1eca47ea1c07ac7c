"""Pure-Python twin of the cell kernels (``_cellk.pyx``): a key's rows in the cells of its
bucket, each cell searched in place (``weir.state.cells``), packed rows written as cells
with numpy (``weir.state.cellcodec.encode_packed``), and a cell's generations merged
(``weir.state.cells.merge``)."""

from __future__ import annotations

from weir.state.cellcodec import encode_packed
from weir.state.cells import find_windows
from weir.state.cells import merge as merge_cells

__all__ = ["encode_packed", "find_windows", "merge_cells"]
