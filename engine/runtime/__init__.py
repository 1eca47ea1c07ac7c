"""The local pipelined runtime: job loading, the operator chain, workers and the job manager."""
