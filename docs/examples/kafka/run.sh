weir run job.py --checkpoint-dir checkpoints --checkpoint-interval-ms 1000
