. ./s3.env
weir run job.py --checkpoint-dir s3://weir/checkpoints --checkpoint-interval-ms 2000
