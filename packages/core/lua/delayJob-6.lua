--[[
  A job waits (a retry with backoff, a deferral, or a paused crawl): it leaves the active set for
  the delayed set. A job parked for a pause also joins the stage's parked set, from which resume
  (or the reconciler, if the crawl runs again before it was parked) promotes it: it waits for as
  long as the pause lasts without being taken again meanwhile.

  KEYS[1] pending   KEYS[2] active   KEYS[3] delayed   KEYS[4] counters   KEYS[5] parked
  KEYS[6] part: the partition's hash (its run, startedAt)
  ARGV[1] jobId
  ARGV[2] counter to increment ('retries', 'deferred'), or ''
  ARGV[3] '1' when parked for a pause
  ARGV[4] the run of the crawl the job began in (its startedAt), or '' for any: a job of a run that a
          reset ended records nothing, though the next run's job of the same URL (the same id) is
          pending (the fuzzer, seed 1191439978:long: an old run's retry left the new run's id in
          the delayed set after done)

  Returns 1 when the job is still pending, 0 when it had already finished or its run is over.
]]
if ARGV[4] ~= '' and redis.call('HGET', KEYS[6], 'startedAt') ~= ARGV[4] then return 0 end
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
if ARGV[3] == '1' then redis.call('SADD', KEYS[5], ARGV[1]) end
if ARGV[2] ~= '' then redis.call('HINCRBY', KEYS[4], ARGV[2], 1) end
return 1
