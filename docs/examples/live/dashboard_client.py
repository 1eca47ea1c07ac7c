"""Live aggregates for a dashboard, from `make demo` (or `weir demo`) on this machine."""

import os

from weir.client import Client, NotFound, to_pandas

url = os.environ.get("WEIR_URL", "http://127.0.0.1:8000")
token = os.environ.get("WEIR_API_TOKEN")  # only if the API was started with one

with Client(url, token=token) as weir:
    print(weir.health().status)  # ok
    # one ad's newest windows, as a DataFrame (needs pandas)
    answer = weir.state("ad-stats", "impressions", "ad-0", limit=3)
    print(to_pandas(answer)[["start", "end", "count", "final"]])
    # the five ads with the most impressions in the newest window that fired
    top = weir.top("ad-stats", "impressions", by="count", n=5)
    print([(row.key, row.value) for row in top.keys])
    try:
        weir.state("ad-stats", "impressions", "no-such-ad")
    except NotFound as error:
        print(error.code)  # key_not_found
    # Server-Sent Events: the answer each time it changes
    for event in weir.stream("ad-stats", "impressions", "ad-0"):
        print("watermark", event.answer.watermark if event.answer else event.error)
        break
