-- A continuous aggregate and a windowed view over one table of orders.
SET 'pipeline.name' = 'shop';

CREATE TABLE orders (shop STRING, item STRING, ts BIGINT, cents BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('url' = 'file:///tmp/orders.jsonl');

-- the current row per shop, kept while the shop had an order in the last day
SET 'table.exec.state.ttl' = '1 d';
CREATE VIEW revenue AS
SELECT shop, COUNT(*) AS orders, SUM(cents) AS cents, MAX(cents) AS biggest
FROM orders
GROUP BY shop;

-- per shop and minute
CREATE VIEW per_minute AS
SELECT shop, window_start, window_end, SUM(cents) AS cents
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
GROUP BY shop, window_start, window_end;
