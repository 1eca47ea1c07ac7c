weir run job.py
