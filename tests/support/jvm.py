"""Java settings for the suite's JVMs (Spark drivers, the standalone cluster's daemons and its
executors): each lives for seconds to minutes over a few thousand records, so the JIT's second
tier and the parallel collector's threads cost more than they return. C1 only and the serial
collector cut a local SparkSession's start and first job from 19-21 to 12-13 CPU seconds here
(docs/decisions/0008-test-tiers.md). Benchmarks do not use this: their JVMs run as shipped."""

from __future__ import annotations

from pathlib import Path

JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def quick_jvm_env(conf_dir: Path) -> dict[str, str]:
    """The environment that gives every Spark JVM started under it ``JAVA_OPTIONS``: drivers
    through ``SPARK_SUBMIT_OPTS``, the cluster's master and workers through
    ``SPARK_DAEMON_JAVA_OPTS``, executors through ``spark-defaults.conf`` in ``conf_dir``
    (``SPARK_CONF_DIR``), which this writes."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.executor.extraJavaOptions {JAVA_OPTIONS}\n", encoding="utf-8"
    )
    return {
        "SPARK_SUBMIT_OPTS": JAVA_OPTIONS,
        "SPARK_DAEMON_JAVA_OPTS": JAVA_OPTIONS,
        "SPARK_CONF_DIR": str(conf_dir),
    }
