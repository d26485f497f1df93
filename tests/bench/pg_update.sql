-- pgbench script: PostgreSQL's fenced write, an UPDATE guarded by the token.
-- One transaction in ten is a stale leader with token 1 (keys are seeded
-- with token 2); the others present the server clock in microseconds.
\set k random(1, :keys)
\set die random(0, 9)
UPDATE fences SET token = w.token, value = w.value
  FROM (SELECT CASE WHEN :die = 0 THEN 1
                    ELSE (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
               END AS token,
               CASE WHEN :die = 0 THEN 'stale-' ELSE 'fresh-' END
                 || repeat('v', 122) AS value) AS w
 WHERE key = :k AND fences.token <= w.token;
