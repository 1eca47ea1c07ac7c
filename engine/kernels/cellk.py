"""Pure-Python twin of the cell lookup kernel (``_cellk.pyx``): a key's rows in the cells of its
bucket, each cell searched in place (``weir.state.cells``)."""

from __future__ import annotations

from weir.state.cells import find_windows

__all__ = ["find_windows"]
