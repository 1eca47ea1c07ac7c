"""The suite's tiers: which one a test is in, and the rule that keeps the fast tier fast.

A test's tier comes from where it lives and what it uses, never from a hand-applied marker:

- ``soak`` for everything under ``tests/soak/``;
- ``cluster`` for a test that uses the Spark standalone cluster or S3 (``CLUSTER_FIXTURES``);
- ``fast`` for ``tests/unit/``, ``tests/property/`` and ``tests/contract/``, and for a test under
  ``tests/security/`` that uses none of ``PROCESS_FIXTURES``;
- ``integration`` for the rest (``tests/integration/``, and security tests that start ``weir``).

A fast test starts no process: ``forbid_processes`` makes ``subprocess``, ``multiprocessing``,
``os.fork`` and ``os.posix_spawn`` raise ``TierError`` for it, naming the rule and the fix (move
the test to ``tests/integration/``). A loopback server in a thread of the test's own process (the
unit under test, or an HTTP stub) is allowed: it costs milliseconds and leaves nothing behind.
"""

from __future__ import annotations

import multiprocessing.process
import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from _pytest.mark.expression import Expression

TIERS = ("fast", "integration", "cluster", "soak")
FAST_FOLDERS = frozenset({"unit", "property", "contract"})
MIXED_FOLDERS = frozenset({"security"})
# the Spark standalone cluster and the S3 server: the cluster tier
CLUSTER_FIXTURES = frozenset({"spark_cluster", "s3_server", "s3", "module_s3"})
# fixtures that start processes: a fast folder may not use them
PROCESS_FIXTURES = frozenset(
    {
        "run_weir",
        "weir_env",
        "weir_server",
        "module_weir_server",
        "kafka_broker",
        "kafka_tls",
        "kafka_sasl",
        "spark",
        "stranger",
        "docker_compose",
        *CLUSTER_FIXTURES,
    }
)


class TierError(RuntimeError):
    """A test does what its tier does not allow."""


def tier_of(folder: str, fixtures: Iterable[str]) -> str:
    """The tier of a test in ``tests/<folder>/`` that uses ``fixtures``.

    Example:
        >>> tier_of("integration", ["s3", "tmp_path"])
        'cluster'
    """
    names = set(fixtures)
    if folder == "soak":
        return "soak"
    if names & CLUSTER_FIXTURES:
        return "cluster"
    if folder in FAST_FOLDERS:
        return "fast"
    if folder in MIXED_FOLDERS and not names & PROCESS_FIXTURES:
        return "fast"
    return "integration"


def folder_tiers(folder: str) -> frozenset[str]:
    """Every tier a test in ``tests/<folder>/`` can be in, by ``tier_of``'s rules (a fast
    folder's test that uses a cluster fixture is refused by ``misplaced``, not moved)."""
    if folder == "soak":
        return frozenset({"soak"})
    if folder in FAST_FOLDERS:
        return frozenset({"fast"})
    if folder in MIXED_FOLDERS:
        return frozenset({"fast", "integration", "cluster"})
    return frozenset({"integration", "cluster"})


def selects_none_of(markexpr: str, folder: str) -> bool:
    """``-m markexpr`` can select no test of ``tests/<folder>/``: its tiers all fail the
    expression. Only for an expression of tier names alone (another marker could be on any
    test): then a tier's run need not import the folder's modules (a collection imports every
    module it visits, then deselects; an integration worker spent 2 of its 5 CPU-seconds of
    collection on the fast folders).

    Example:
        >>> selects_none_of("cluster or soak", "unit"), selects_none_of("fast", "security")
        (True, False)
    """
    names = set(re.findall(r"[A-Za-z_][\w.-]*", markexpr)) - {"and", "or", "not"}
    if not names or not names <= set(TIERS):
        return False
    expression = Expression.compile(markexpr)
    return not any(expression.evaluate(_OnlyMarker(tier)) for tier in folder_tiers(folder))


class _OnlyMarker:
    """A ``-m`` matcher for a test that carries one marker, ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, name: str, /, **kwargs: str | int | bool | None) -> bool:
        return name == self.name


def folder_of(item: pytest.Item, tests_root: Path) -> str:
    """The first folder under ``tests/`` that holds ``item``'s file."""
    return item.path.relative_to(tests_root).parts[0]


def misplaced(item: pytest.Item, folder: str) -> str | None:
    """Why ``item`` may not be in ``folder``, or None: a fast folder uses no process fixture."""
    used = sorted(set(getattr(item, "fixturenames", ())) & PROCESS_FIXTURES)
    if folder in FAST_FOLDERS and used:
        return (
            f"{item.nodeid} is in tests/{folder}/ (the fast tier) but uses {', '.join(used)}, "
            "which start processes; move it to tests/integration/"
        )
    return None


def forbid_processes(monkeypatch: pytest.MonkeyPatch, nodeid: str) -> None:
    """Make every way of starting a process raise ``TierError`` until the test ends."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise TierError(
            f"{nodeid} is a fast-tier test and started a process ({_what(args)}); fast tests "
            "start no process or server: move it to tests/integration/ (see tests/support/tiers.py)"
        )

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse)
    monkeypatch.setattr(os, "posix_spawnp", refuse)
    monkeypatch.setattr(os, "system", refuse)


def _what(args: tuple[Any, ...]) -> str:
    """The command a refused call would have run, as far as its arguments tell."""
    if args and isinstance(args[0], subprocess.Popen) and len(args) > 1:
        argv = args[1]
        return " ".join(map(str, argv[:3])) if isinstance(argv, list | tuple) else str(argv)
    if args and isinstance(args[0], multiprocessing.process.BaseProcess):
        return f"multiprocessing {args[0].name}"
    return repr(args[:2])


# Session fixtures start once per xdist worker. The heavy ones (a JVM each) are kept to one worker
# by grouping every test module that uses them; `--dist loadgroup` runs a group on one worker.
JVM_GROUPS = (("spark_cluster", "spark-cluster"), ("spark", "spark-local"))
SHARED_SCOPES = frozenset({"module", "class", "package"})


def worker_groups(items: Iterable[pytest.Item]) -> dict[str, str]:
    """The xdist group of each test that needs one, by node id: a test that uses a JVM fixture
    (``JVM_GROUPS``) joins that JVM's group; a module with a module- or class-scoped fixture (a
    server its tests share) is a group of its own, so that fixture starts once, unless one of
    its tests uses a JVM, which then takes the whole module. Other tests spread over every
    worker."""
    items = list(items)
    jvm: dict[str, str] = {}  # node id -> group
    module_jvm: dict[str, str] = {}  # module path -> a JVM group one of its tests uses
    shared: set[str] = set()  # module paths with a shared fixture
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        group = next((g for fixture, g in JVM_GROUPS if fixture in names), None)
        if group is not None:
            jvm[item.nodeid] = group
            module_jvm.setdefault(str(item.path), group)
        if _shares_a_fixture(item):
            shared.add(str(item.path))
    groups: dict[str, str] = {}
    for item in items:
        module = str(item.path)
        if item.nodeid in jvm:
            groups[item.nodeid] = jvm[item.nodeid]
        elif module in shared:
            groups[item.nodeid] = module_jvm.get(module, item.path.name)
    return groups


def mark_groups(
    config: pytest.Config, items: Iterable[pytest.Item], groups: dict[str, str]
) -> None:
    """Give each test in ``groups`` (node id -> group) its ``xdist_group`` marker and, on an
    xdist worker under ``--dist loadgroup``, the ``@group`` suffix of its node id that the
    scheduler groups by.

    pytest-xdist 3.8 appends that suffix by setting ``item._nodeid``, which pytest 9.2 no longer
    reads (a node's id is ``item._id``, a ``NodeId``), so every test would land anywhere; the
    suffix is put where pytest reads it until xdist follows.
    """
    from _pytest.nodeid import NodeId

    suffix = bool(config.getoption("loadgroup", False))
    for item in items:
        group = groups.get(item.nodeid)
        if group is None:
            continue
        item.add_marker(pytest.mark.xdist_group(group))
        if suffix and "@" not in item.nodeid:
            # the suffix rides on the last name (with the parameters, if any), so the id reads
            # back as exactly ``<nodeid>@<group>`` however pytest rebuilds it
            path, _, rest = f"{item.nodeid}@{group}".partition("::")
            item._id = NodeId(path=path, names=tuple(rest.split("::")))


def _shares_a_fixture(item: pytest.Item) -> bool:
    """``item`` uses a fixture scoped to its module or class (pytest's own fixture info)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope in SHARED_SCOPES for defs in info.name2fixturedefs.values())
