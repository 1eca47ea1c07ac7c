from weir.client import Client

with Client("http://127.0.0.1:8000") as weir:
    answer = weir.state("clicks", "per_minute", "home")
    for window in answer.windows:
        print(window.start, window.end, window.views, window.avg_ms, window.final)
