"""The keyed operators a worker runs (window, sliding, session, triggered, process, co-process,
broadcast), their state deltas and top-N. What they store, and how it reads back, is
``weir.engine.runtime.stored``'s: the API and the backfill read state through it without
importing any operator."""
