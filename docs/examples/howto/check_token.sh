curl -s -w ' %{http_code}\n' 'http://127.0.0.1:8000/clicks/per_minute/state/home?limit=1'
curl -s -w ' %{http_code}\n' -H "Authorization: Bearer $(cat weir-token)" \
  'http://127.0.0.1:8000/clicks/per_minute/state/home?limit=1'
curl -s -w ' %{http_code}\n' http://127.0.0.1:8000/health
