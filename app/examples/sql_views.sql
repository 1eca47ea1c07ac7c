-- Stream SQL beyond windows (issue 43): `weir sql app/examples/sql_views.sql`, then ask the
-- views with pull queries: weir query ad-views "SELECT key, n FROM totals ORDER BY n DESC LIMIT 5"
SET 'pipeline.name' = 'ad-views';

CREATE TABLE events (
  id STRING,
  event STRING,
  ts BIGINT,
  `value` DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('url' = 'generator://ads?rate=2000&ids=1000&seed=7');

-- a continuous aggregate: GET /ad-views/totals/state/ad-0 answers the current row
SET 'table.exec.state.ttl' = '1 h';
CREATE VIEW totals AS
SELECT id, COUNT(*) AS n, SUM(`value`) AS total FROM events WHERE event = 'impression' GROUP BY id;

-- Top-N and deduplication, per id
CREATE VIEW best AS                 -- Top-N: each id's 3 rows of largest value
SELECT id, ts, `value`, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY `value` DESC) AS rn FROM events)
WHERE rn <= 3;

CREATE VIEW latest AS               -- deduplication: keep the last row by time
SELECT * FROM (                     -- (ORDER BY ts ASC: keep the first)
  SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts DESC) AS rn FROM events)
WHERE rn = 1;

-- an interval join of the one table with itself
CREATE VIEW clicked AS
SELECT i.id, i.ts AS shown_at, c.ts AS clicked_at
FROM events AS i JOIN events AS c
  ON i.id = c.id
 AND c.ts BETWEEN i.ts - INTERVAL '1' SECOND AND i.ts + INTERVAL '5' SECOND
WHERE i.event = 'impression' AND c.event = 'click';
