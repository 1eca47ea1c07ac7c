. ./s3.env
weir run job.py --checkpoint-dir s3://weir/checkpoints --restore latest --state-dir /var/tmp/weir
