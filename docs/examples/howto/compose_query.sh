curl -s -H "Authorization: Bearer $(cat weir-token)" \
  'http://127.0.0.1:8000/ad-stats/impressions/top?by=count&n=3' | python3 -m json.tool
