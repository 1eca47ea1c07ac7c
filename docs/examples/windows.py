"""The window assigners side by side: tumbling, sliding, session and count windows."""

from weir import Job, agg, sources, testing, windows

job = Job("assigners")
keyed = job.source(sources.jsonl("clicks.jsonl"), timestamp="ts").key_by("user")
keyed.window(windows.tumbling(ms=10_000)).aggregate("tumbling", n=agg.count())
keyed.window(windows.sliding(size_ms=10_000, slide_ms=5_000)).aggregate("sliding", n=agg.count())
keyed.window(windows.session(gap_ms=3_000)).aggregate("session", n=agg.count())
keyed.window(windows.count(2)).aggregate("count", n=agg.count())

events = [{"user": "ann", "ts": t} for t in (1_000, 2_000, 4_500, 9_000, 11_000)]
result = testing.run(job, events)
for op, rows in result.by_operator.items():
    print(op, [(r["start"], r["end"], r["n"]) for r in rows if r["final"]])
