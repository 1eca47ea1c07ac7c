"""The control plane: the job manager, its checkpoint coordinator, live backfills, the status it
publishes for API processes, and its admin control channel."""
