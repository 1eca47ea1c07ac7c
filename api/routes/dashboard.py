"""``GET /``: the dashboard page (plain HTML + JS, no build step)."""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(tags=["dashboard"])


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def dashboard() -> HTMLResponse:
    return HTMLResponse(files("weir.api").joinpath("dashboard.html").read_text(encoding="utf-8"))
