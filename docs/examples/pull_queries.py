"""Serve views.sql over a file of orders, then ask its state in SQL: with the client and with
`weir query`."""

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from weir.client import Client

orders = [
    {"shop": shop, "item": "tea", "ts": 1_000 * i, "cents": 100 + i}
    for i, shop in enumerate(["north", "south", "east", "north", "west", "north", "south"])
]
Path("orders.jsonl").write_text("".join(json.dumps(o) + "\n" for o in orders))
views = Path(__file__).parent / "views.sql"
weir = [sys.executable, "-m", "weir"]
server = subprocess.Popen(
    [*weir, "sql", str(views), "--source", f"file://{Path.cwd()}/orders.jsonl",
     "--api-port", "0", "--state-dir", "state"],
    stderr=subprocess.PIPE, text=True,
)  # fmt: skip
try:
    for line in server.stderr or []:  # weir says where it serves
        found = re.search(r"serving on (\S+)", line)
        if found:
            url = found.group(1)
            break
    with Client(url) as client:
        while client.job("shop").state != "finished":  # the file is read to its end
            time.sleep(0.1)
        top = client.sql("shop", "SELECT shop, cents FROM revenue ORDER BY cents DESC LIMIT 2")
        print(top.rows)
        some = client.sql("shop", "SELECT key, orders FROM revenue WHERE key IN ('north', 'east')")
        print(some.rows, "keys read:", some.keys_read)
        print(client.sql("shop", "SELECT COUNT(*) AS shops, SUM(orders) AS n FROM revenue").rows)
        minute = client.sql("shop", "SELECT key, window_start, cents FROM per_minute "
                                    "WHERE key LIKE 'n%' AND window_start >= 0")  # fmt: skip
        print(minute.rows)
    query = "SELECT key, orders, cents FROM revenue WHERE orders > 1"
    out = subprocess.run([*weir, "query", "shop", query, "--api-url", url],
                         capture_output=True, text=True, check=True)  # fmt: skip
    print(out.stdout, end="")
finally:
    server.terminate()
    server.wait(30)
