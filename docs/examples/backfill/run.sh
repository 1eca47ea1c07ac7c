weir run job.py --restore savepoints/clicks/chk-1
