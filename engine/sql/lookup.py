"""Lookup joins in SQL (Flink's ``LookupJoin`` semantics) against a table weir keeps itself:

    SELECT o.order_id, c.name, c.tier
    FROM orders AS o [LEFT] JOIN customers FOR SYSTEM_TIME AS OF PROCTIME() AS c
      ON o.customer_id = c.id

``customers`` is a stream with a PRIMARY KEY (a slowly changing dimension read from a file or a
Kafka topic): weir keeps its current row per key, the last to arrive, as keyed state (value
state ``right``, served at ``/{job}/{view}/state/{key}``, checkpointed, rescaled by key
groups). Each probe row joins, when it arrives, the current row of its key (processing time:
``AS OF PROCTIME()``, or a column the table declares ``AS PROCTIME()``); without one an INNER
join emits nothing and a LEFT join the row padded with NULLs. Nothing waits and nothing is
late; the probe rows are not kept.

Processing-time semantics: which row a probe meets depends on the order the two inputs
arrive in, so a replay after a failure can pair a probe row with another version than the
first run did (as a lookup into an external database would). A result that must not depend on
arrival is the event-time temporal join's (``temporal.py``).
"""

from __future__ import annotations

from typing import Any

from weir.engine.joins.buffers import RIGHT, JoinContext
from weir.engine.sql.temporal import VERSIONED, TemporalPlan, VersionJoin


class LookupJoin(VersionJoin):
    """A keyed co-process function: ``process1`` joins a probe row with the current row,
    ``process2`` replaces the current row of its key.

    Args:
        plan: the view's plan (``plan.lookup``).
    """

    def __init__(self, plan: TemporalPlan) -> None:
        super().__init__(
            plan,
            f"{plan.kind} lookup join FOR SYSTEM_TIME AS OF PROCTIME(), current rows of "
            f"{plan.tables[VERSIONED]} by {', '.join(plan.keys[VERSIONED])}",
        )

    def process1(self, event: Any, ctx: JoinContext) -> None:
        """A probe row: joined with its key's current row at once."""
        self.join(ctx, event, ctx.value(RIGHT).get())

    def process2(self, event: Any, ctx: JoinContext) -> None:
        """A row of the kept table: its key's current row from now on."""
        ctx.value(RIGHT).set(event)
