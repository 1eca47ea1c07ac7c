"""The Spark runtime: the same job definition as a batch backfill (``weir backfill``)."""
