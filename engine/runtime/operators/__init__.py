"""The keyed operators a worker runs (window, sliding, session, process), their generated folds
and top-N, and ``codec``, the one reading of their stored state (the API and the backfill use it
without importing the operators themselves)."""
