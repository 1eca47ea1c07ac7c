"""The local pipelined runtime, by plane; each plane imports only the ones below it.

- ``control/``: the job manager (``jobmanager.py``) and its parts: the checkpoint coordinator,
  live backfills, the worker processes or a Spark barrier stage (``launch.py``, ``cluster.py``),
  the status file and the admin control channel.
- ``task/``: a worker process: its loop (``worker.py``), source side, chain, routing and the
  exchange, keyed side and channel watermarks, barrier alignment, snapshots, restore.
- ``operators/``: the keyed operators (window, sliding, session, triggered, process), their
  state deltas and top-N.
- ``stored/``: what the operators store and how it reads back (codec, folds, ranking): the one
  part of the runtime the query API reads state through.
- Shared by the planes and the API: ``messages.py`` (job manager <-> worker, over ``wire.py``'s
  data-only codec), ``view.py`` (what the API reads of a job), ``peerauth.py``, ``netio.py`` and
  ``stateproto.py`` (the handshake and frames between processes); ``config.py``, ``loader.py``,
  ``outputs.py`` (side outputs), ``heap.py`` and ``gctuning.py`` serve them all.
"""
