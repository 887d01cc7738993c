-- How fast one request generates on an endpoint, as its streams last told a worker process
-- (tokens/s per request). The engine asks for a streamed chunk every few seconds from this rate;
-- a process that had to learn it anew sent its first wave of requests at the run's own, much
-- shorter interval (16 tokens a chunk by default), which costs a CPU server's API process a
-- serialization per chunk. Kept here, the next run, or the same run after a restart, starts
-- with the rate the last one knew (README, "The chunk size a run starts with").
ALTER TABLE endpoint_capacity
    ADD COLUMN stream_tps    real CHECK (stream_tps > 0),
    ADD COLUMN stream_tps_at timestamptz;
