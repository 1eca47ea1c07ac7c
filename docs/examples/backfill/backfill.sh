weir backfill job.py --input history.jsonl --into-savepoint savepoints
