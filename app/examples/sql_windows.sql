-- Window joins, window Top-N and window deduplication (issue 43): `weir sql
-- app/examples/sql_windows.sql`, then GET /ad-windows/best_per_minute/state/ad-0 answers ad-0's
-- ranking of its last minute, or: weir query ad-windows "SELECT * FROM clicked_per_minute"
SET 'pipeline.name' = 'ad-windows';

CREATE TABLE events (
  id STRING,
  event STRING,
  ts BIGINT,
  `value` DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('url' = 'generator://ads?rate=2000&ids=1000&seed=7');

CREATE VIEW best_per_minute AS      -- each id's 3 largest values of each minute
SELECT * FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, id
                               ORDER BY `value` DESC) AS rn
  FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE)))
WHERE rn <= 3;

CREATE VIEW last_per_minute AS      -- each id's last row of each minute (ASC: its first)
SELECT id, ts, `value`, window_start, window_end FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, id ORDER BY ts DESC) AS rn
  FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE)))
WHERE rn = 1;

CREATE VIEW clicked_per_minute AS   -- impressions and clicks of an id in the same minute
SELECT L.id, COALESCE(L.window_start, R.window_start) AS window_start,
       L.`value` AS shown, R.`value` AS clicked
FROM (SELECT * FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
      WHERE event = 'impression') L
FULL JOIN (SELECT * FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
      WHERE event = 'click') R
ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.id = R.id;
