curl -s 'http://127.0.0.1:8000/clicks/per_minute/state/home' | python3 -m json.tool
