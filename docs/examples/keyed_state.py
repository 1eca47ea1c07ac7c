"""Keyed state and timers in a process function: a sensor that stays hot for 10 s alerts."""

from weir import Job, OutputTag, sources, testing

HOT = 80.0
ALERTS = OutputTag("alerts")


class Overheat:
    def process(self, event, ctx):
        since = ctx.value("hot_since")  # keyed state: one value per sensor
        if event["temp"] < HOT:
            since.clear()
        elif since.get() is None:
            since.set(ctx.timestamp)
            ctx.register_event_time_timer(ctx.timestamp + 10_000)
        ctx.emit({"sensor": ctx.key, "ts": ctx.timestamp, "temp": event["temp"]})

    def on_timer(self, timestamp, ctx):
        since = ctx.value("hot_since").get()
        if since is not None and timestamp == since + 10_000:
            ctx.output(ALERTS, {"sensor": ctx.key, "hot_since": since})


job = Job("sensors")
readings = job.source(sources.jsonl("readings.jsonl"), timestamp="ts").key_by("sensor")
result = readings.process(Overheat(), name="overheat")
result.side_output(ALERTS)

events = [
    {"sensor": "s1", "ts": 0, "temp": 85.0},
    {"sensor": "s2", "ts": 1_000, "temp": 90.0},
    {"sensor": "s2", "ts": 4_000, "temp": 60.0},  # s2 cools down: no alert
    {"sensor": "s1", "ts": 12_000, "temp": 88.0},  # s1 has been hot for 10 s
]
result = testing.run(job, events)
print(len(result.results), "readings")
print(result.side["overheat"]["alerts"])
