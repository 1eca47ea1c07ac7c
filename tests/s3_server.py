"""The S3-compatible test server lives in ``loadtest/s3_server.py`` (the benchmarks start it too,
and ``loadtest`` does not import from ``tests``); tests keep importing it from here."""

from loadtest.s3_server import ACCESS_KEY, BUCKET, SECRET_KEY, S3Server

__all__ = ["ACCESS_KEY", "BUCKET", "SECRET_KEY", "S3Server"]
