curl -s 'http://127.0.0.1:8000/jobs/clicks' | python3 -c '
import json, sys
for w in json.load(sys.stdin)["workers"]:
    print("worker %s on %s: key groups %s-%s" % (w["index"], w["host"], *w["key_groups"]))
'
