"""The peer job in PyFlink's SQL, for ``benchmarks.cpu_bench`` (run by the Flink venv's Python, not
weir's): filter impressions, key by id, 10 s tumbling count + sum of value, 2 s bound, over a
JSONL file, into a blackhole sink, at parallelism 1.

    .bench-venvs/flink/bin/python benchmarks/flink_sql_job.py EVENTS.jsonl
"""

from __future__ import annotations

import sys
import time

from pyflink.table import EnvironmentSettings, TableEnvironment


def main(path: str) -> None:
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", "1")
    conf.set("rest.bind-address", "127.0.0.1")
    conf.set("jobmanager.bind-host", "127.0.0.1")
    conf.set("taskmanager.bind-host", "127.0.0.1")
    env.execute_sql(f"""
        CREATE TABLE events (
          id STRING, event STRING, ts BIGINT, `value` DOUBLE,
          rt AS TO_TIMESTAMP_LTZ(ts, 3),
          WATERMARK FOR rt AS rt - INTERVAL '2' SECOND
        ) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'json')
    """)
    env.execute_sql("""
        CREATE TABLE sink (id STRING, window_end TIMESTAMP(3), n BIGINT, total DOUBLE)
        WITH ('connector' = 'blackhole')
    """)
    t0 = time.perf_counter()
    env.execute_sql("""
        INSERT INTO sink
        SELECT id, window_end, COUNT(*), SUM(`value`)
        FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(rt), INTERVAL '10' SECOND))
        WHERE event = 'impression'
        GROUP BY id, window_start, window_end
    """).wait()
    print(f"flink_sql_job: done in {time.perf_counter() - t0:.2f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
