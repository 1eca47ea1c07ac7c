"""Event generators, load tools and the benchmark harness (``make bench``)."""
