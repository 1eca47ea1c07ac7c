"""``/docs`` (Swagger UI) and ``/redoc``, whose scripts and styles weir serves itself: the pages
worked only with a CDN before, and were blank offline.

The assets come from the ``fastapi-offline`` package on PyPI (MIT; it bundles Swagger UI,
Apache-2.0, and ReDoc, MIT, with their licence notices in the files' headers). Only the four
files named here are served, from ``/docs/static/``; like the pages, they hold no data, so they
need no token.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse, Response

from weir.api.errors import not_found

router = APIRouter(tags=["docs"])

STATIC = "/docs/static"
ASSETS = {  # name -> media type
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
ASSET_PATHS = frozenset(f"{STATIC}/{name}" for name in ASSETS)
_CACHE = "public, max-age=86400"  # they change only with the installed package


@router.get("/docs", include_in_schema=False)
def swagger_ui(request: Request) -> HTMLResponse:
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root}/openapi.json",
        title="weir - Swagger UI",
        oauth2_redirect_url=f"{root}/docs/oauth2-redirect",
        swagger_js_url=f"{root}{STATIC}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{STATIC}/swagger-ui.css",
        swagger_favicon_url=f"{root}{STATIC}/favicon.png",
    )


@router.get("/docs/oauth2-redirect", include_in_schema=False)
def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc", include_in_schema=False)
def redoc(request: Request) -> HTMLResponse:
    root = request.scope.get("root_path", "")
    return get_redoc_html(
        openapi_url=f"{root}/openapi.json",
        title="weir - ReDoc",
        redoc_js_url=f"{root}{STATIC}/redoc.standalone.js",
        redoc_favicon_url=f"{root}{STATIC}/favicon.png",
        with_google_fonts=False,  # a font from a CDN: the system's serve as well
    )


@router.get(STATIC + "/{name}", include_in_schema=False)
def asset(name: Annotated[str, Path(max_length=64)]) -> Response:
    media = ASSETS.get(name)
    if media is None:
        raise not_found("not_found", f"no documentation asset {name!r}; there are {sorted(ASSETS)}")
    body = files("fastapi_offline").joinpath("static", name).read_bytes()
    return Response(body, media_type=media, headers={"Cache-Control": _CACHE})
