. ./s3.env
weir checkpoints clicks --checkpoint-dir s3://weir/checkpoints
