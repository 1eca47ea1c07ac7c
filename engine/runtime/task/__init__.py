"""The task plane: a worker process's loop, its source side, routing and the exchange between
workers, barrier alignment, snapshots and restore."""
