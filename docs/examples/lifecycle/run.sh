weir run job.py --checkpoint-interval-ms 1000
