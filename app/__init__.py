"""The ``weir`` command line, logging set-up, process supervision and the demo job."""
