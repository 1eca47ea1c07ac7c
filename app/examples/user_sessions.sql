-- Flink's legacy group windows, as in the seed: sessions per user, closed after a 30 minute gap.
SET 'pipeline.name' = 'user-sessions';
SET 'table.exec.emit.allow-lateness' = '1 min';

CREATE TABLE clicks (
  user_id STRING,
  url STRING,
  rowtime BIGINT,
  WATERMARK FOR rowtime AS rowtime - INTERVAL '10' SECOND
) WITH ('url' = 'file:///var/lib/weir/clicks.jsonl');

CREATE VIEW sessions AS
SELECT user_id,
       SESSION_START(rowtime, INTERVAL '30' MINUTE) AS session_start,
       SESSION_END(rowtime, INTERVAL '30' MINUTE) AS session_end,
       COUNT(*) AS clicks, COUNT(DISTINCT url) AS pages
FROM clicks
WHERE url NOT LIKE '%/health'
GROUP BY SESSION(rowtime, INTERVAL '30' MINUTE), user_id;
