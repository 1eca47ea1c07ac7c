curl -s -w ' %{http_code}\n' http://127.0.0.1:8000/health
