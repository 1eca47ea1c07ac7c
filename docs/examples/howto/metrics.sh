curl -s http://127.0.0.1:8000/metrics \
  | grep -E '^weir_(job_state|records_in_total|watermark_lag_seconds|last_checkpoint_timestamp_seconds)'
