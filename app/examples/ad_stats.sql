-- The ad-stats job in SQL: `weir sql app/examples/ad_stats.sql` (or `weir run …`).
SET 'pipeline.name' = 'ad-stats-sql';

-- the one source table; ts is the event time in epoch milliseconds, as everywhere in weir
CREATE TABLE events (
  id STRING,
  event STRING,
  ts BIGINT,
  `value` DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (
  'connector' = 'url',
  'url' = 'generator://ads?rate=2000&ids=1000&seed=7',
  'allowed-lateness' = '5 s'
);

-- a user-defined aggregate (create / add / merge / result), registered by name
CREATE FUNCTION median AS 'weir.app.examples.median.Median';

-- each view is one window operator: GET /ad-stats-sql/impressions/state/ad-0
CREATE VIEW impressions AS
SELECT id, window_start, window_end,
       COUNT(*) AS impressions, SUM(`value`) AS total, MAX(`value`) AS max_value
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
WHERE event = 'impression'
GROUP BY id, window_start, window_end;

-- two GROUP BY columns: the key is 'ad-0|click' (GET …/by_event/state/ad-0%7Cclick)
CREATE VIEW by_event AS
SELECT id, event, window_start, window_end,
       COUNT(*) AS n, AVG(`value`) AS mean_value, median(`value`) AS median_value
FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
GROUP BY id, event, window_start, window_end;
