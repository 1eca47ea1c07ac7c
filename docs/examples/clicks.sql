-- The quickstart's job in Stream SQL: `weir sql clicks.sql` (beside events.jsonl)
SET 'pipeline.name' = 'clicks';

CREATE TABLE views (
  page STRING,
  ts BIGINT,
  ms DOUBLE,  -- DOUBLE: AVG of a BIGINT is a BIGINT in SQL
  WATERMARK FOR ts AS ts
) WITH (
  'connector' = 'url',
  'url' = 'events.jsonl'
);

-- the view is the window operator: GET /clicks/per_minute/state/home
CREATE VIEW per_minute AS
SELECT page, window_start, window_end, COUNT(*) AS views, AVG(ms) AS avg_ms
FROM TABLE(TUMBLE(TABLE views, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
GROUP BY page, window_start, window_end;
