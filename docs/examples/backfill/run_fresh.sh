weir run job.py --fresh
