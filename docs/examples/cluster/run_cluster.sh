weir run job.py --master spark://127.0.0.1:7077 --parallelism 2 \
    --checkpoint-dir s3://weir/checkpoints --restore latest
