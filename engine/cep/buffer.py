"""The shared buffer (Flink's ``SharedBuffer`` and ``SharedBufferAccessor``): the events of a
key's partial matches, stored once however many matches hold them.

Each event a run takes becomes a *node* ``(timestamp, n, pattern name)``; the node keeps an
edge to the node of the run's previous event, labelled with the run's version. Runs that
branch share their common prefix: a match is read back from its last node by following, at
each node, the edge whose version is compatible with the match's (``extract``).

Nodes, edges and events carry reference counts (Flink's ``Lockable``): a run locks the node it
points at and the edges compatible with its version; releasing the last lock removes the edge,
and a node without locks goes with its event. So the buffer holds exactly the events some live
run or unreleased match can still reach.

Its stored form is plain lists (msgpack): ``to_stored``/``from_stored``.
"""

from __future__ import annotations

from typing import Any

from weir.engine.cep.computation import Dewey, NodeId, compatible
from weir.engine.cep.skip import EventId, PathIds

Match = dict[str, list[Any]]  # pattern name -> the events it took, oldest first


class _Edge:
    __slots__ = ("locks", "target", "version")

    def __init__(self, target: NodeId | None, version: Dewey, locks: int = 0) -> None:
        self.target = target
        self.version = version
        self.locks = locks


class _Node:
    __slots__ = ("edges", "locks")

    def __init__(self, locks: int = 0, edges: list[_Edge] | None = None) -> None:
        self.locks = locks
        self.edges: list[_Edge] = [] if edges is None else edges


class SharedBuffer:
    """One key's shared buffer."""

    __slots__ = ("counts", "events", "nodes")

    def __init__(self) -> None:
        self.events: dict[EventId, list[Any]] = {}  # id -> [event, locks]
        self.nodes: dict[NodeId, _Node] = {}
        self.counts: dict[int, int] = {}  # timestamp -> events registered at it so far

    def __len__(self) -> int:
        """How many events it holds."""
        return len(self.events)

    def register(self, event: Any, ts: int) -> EventId:
        """Store an event some run takes; it is locked once, for the time it is processed."""
        n = self.counts.get(ts, 0)
        self.counts[ts] = n + 1
        eid = (ts, n)
        self.events[eid] = [event, 1]
        return eid

    def put(self, page: str, eid: EventId, previous: NodeId | None, version: Dewey) -> NodeId:
        """The node of event ``eid`` taken for ``page``, with an edge to ``previous``."""
        if previous is not None:
            self.lock(previous, version)
        node_id = (eid[0], eid[1], page)
        node = self.nodes.get(node_id)
        if node is None:
            node = self.nodes[node_id] = _Node()
            self.events[eid][1] += 1
        node.edges.append(_Edge(previous, version))
        return node_id

    def lock(self, node_id: NodeId | None, version: Dewey) -> None:
        if node_id is None:
            return
        node = self.nodes.get(node_id)
        if node is not None:
            node.locks += 1
            for edge in node.edges:
                if compatible(version, edge.version):
                    edge.locks += 1

    def release(self, node_id: NodeId | None, version: Dewey) -> None:
        """Drop a run's lock on ``node_id`` and, as locks reach zero, the edges and nodes
        behind it."""
        todo: list[tuple[NodeId, Dewey]] = [] if node_id is None else [(node_id, version)]
        while todo:
            current, ver = todo.pop()
            node = self.nodes.get(current)
            if node is None:
                continue
            kept: list[_Edge] = []
            for edge in node.edges:
                if compatible(ver, edge.version) and _release(edge):
                    if edge.target is not None:
                        todo.append((edge.target, edge.version))
                    continue
                kept.append(edge)
            node.edges = kept
            if _release(node):
                del self.nodes[current]
                self.release_event((current[0], current[1]))

    def release_event(self, eid: EventId) -> None:
        found = self.events.get(eid)
        if found is not None:
            if found[1] <= 0 or found[1] == 1:
                del self.events[eid]
            else:
                found[1] -= 1

    def advance_time(self, ts: int) -> None:
        """No event before ``ts`` will come: forget the counters of earlier timestamps."""
        if self.counts:
            for t in [t for t in self.counts if t < ts]:
                del self.counts[t]

    def extract(self, node_id: NodeId, version: Dewey) -> list[PathIds]:
        """Every path from ``node_id`` back to a run's start along edges compatible with
        ``version`` (one, for a run), each as pattern name -> event ids, oldest first."""
        found: list[PathIds] = []
        if node_id not in self.nodes:
            return found
        todo: list[tuple[NodeId | None, Dewey, list[NodeId]]] = [(node_id, version, [])]
        while todo:
            current, ver, path = todo.pop()
            if current is None:
                found.append(_as_path(path))
                continue
            path.append(current)
            first = True
            for edge in self.nodes[current].edges:
                if compatible(ver, edge.version):
                    branch = path if first else list(path)
                    first = False
                    todo.append((edge.target, edge.version, branch))
        return found

    def materialize(self, path: PathIds) -> Match:
        """A path's events, by pattern name."""
        events = self.events
        return {name: [events[eid][0] for eid in ids] for name, ids in path.items()}

    # -- stored form -----------------------------------------------------------------------------

    def to_stored(self) -> list[Any]:
        events = [[t, n, ev, locks] for (t, n), (ev, locks) in self.events.items()]
        nodes = [
            [t, n, page, node.locks, [[e.target, list(e.version), e.locks] for e in node.edges]]
            for (t, n, page), node in self.nodes.items()
        ]
        counts = [[t, c] for t, c in self.counts.items()]
        return [events, nodes, counts]

    @classmethod
    def from_stored(cls, stored: list[Any]) -> SharedBuffer:
        events, nodes, counts = stored
        buffer = cls()
        buffer.events = {(t, n): [ev, locks] for t, n, ev, locks in events}
        for t, n, page, locks, edges in nodes:
            buffer.nodes[(t, n, page)] = _Node(
                locks,
                [_Edge(None if tg is None else (tg[0], tg[1], tg[2]), tuple(v), lk)
                 for tg, v, lk in edges],
            )  # fmt: skip
        buffer.counts = {t: c for t, c in counts}
        return buffer


def _release(lockable: _Node | _Edge) -> bool:
    """Java's ``Lockable.release``: true once no lock is left."""
    if lockable.locks <= 0:
        return True
    lockable.locks -= 1
    return lockable.locks == 0


def _as_path(nodes: list[NodeId]) -> PathIds:
    """The nodes of a path, last event first, as pattern name -> event ids oldest first (names
    in the order they first took an event)."""
    out: PathIds = {}
    for t, n, page in reversed(nodes):
        out.setdefault(page, []).append((t, n))
    return out
