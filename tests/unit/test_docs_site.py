"""The docs site's own checks: generated pages match the code, the site needs no network.

``make docs`` (mkdocs build --strict) fails on a broken link, anchor or included file; these
checks cover what it does not: the HTTP reference is what ``.ci/http_reference.py`` writes from
the app's OpenAPI schema today, the theme fetches no web fonts, no page loads a script from
elsewhere, and every page of the nav exists.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "http_reference", ROOT / ".ci" / "http_reference.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config() -> dict[str, Any]:
    class Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml may use !!python/name tags (pymdownx); this check reads only plain keys
    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda *_: None)
    config: dict[str, Any] = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    return config


def test_the_http_reference_is_generated_from_todays_routes() -> None:
    for path, text in _generator().outputs().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} differs from the app's OpenAPI schema: run make reference"
        )


def test_the_site_loads_nothing_from_the_network() -> None:
    config = _config()
    assert config["theme"]["font"] is False  # Material would fetch Google Fonts otherwise
    for key in ("extra_javascript", "extra_css"):
        for entry in config.get(key, []):
            src = entry if isinstance(entry, str) else entry["path"]
            assert not re.match(r"(https?:)?//", src), f"{key} loads {src} from the network"


def _pages(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in _pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _pages(value)]
    return []


def test_every_page_of_the_nav_exists_in_the_users_order() -> None:
    config = _config()
    pages = _pages(config["nav"])
    assert pages and all((ROOT / "docs" / page).is_file() for page in pages)
    sections = [next(iter(item)) for item in config["nav"]]
    order = ["Getting started", "Tutorials", "Concepts", "How-to", "Reference", "Operations"]
    assert [s for s in sections if s in order] == order
    assert sections.index("Benchmarks") > sections.index("Operations")
    assert sections[-1] == "Contributing"


def test_the_python_reference_renders_every_public_name() -> None:
    import weir.engine

    page = (ROOT / "docs" / "reference" / "python.md").read_text()
    missing = [n for n in weir.engine.__all__ if f"::: weir.{n}\n" not in page]
    assert not missing, f"docs/reference/python.md has no '::: weir.<name>' for {missing}"
    assert "::: weir.client\n" in page and "::: weir.testing\n" in page
