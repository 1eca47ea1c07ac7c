"""The local pipelined runtime, by plane.

- ``control/``: the job manager (``jobmanager.py``) and its parts: the checkpoint coordinator,
  live backfills, the worker processes, the status file and the admin control channel.
- ``task/``: a worker process: its loop (``worker.py``), source side, chain, routing and the
  exchange, keyed side and channel watermarks, barrier alignment, snapshots, restore.
- ``operators/``: the keyed operators (window, sliding, session, process), their folds and
  top-N, and ``codec.py``, the one reading of their stored state.
- ``messages.py`` (job manager <-> worker, over ``wire.py``'s data-only codec) and ``view.py``
  (what the API reads of a job) are shared by the planes and the API.
- ``config.py``, ``loader.py``, ``outputs.py`` (side outputs) and ``heap.py`` serve them all.
"""
