weir backfill job.py --input history.jsonl --live http://127.0.0.1:8000
