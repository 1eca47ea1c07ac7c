weir run job_v2.py --restore latest --parallelism 4
