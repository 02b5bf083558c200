--[[
  A job waits (a retry with backoff, a deferral, or a paused crawl): it leaves the active set for
  the delayed set. A job parked for a pause also joins the stage's parked set, from which resume
  (or the reconciler, if the crawl runs again before it was parked) promotes it: it waits for as
  long as the pause lasts without being taken again meanwhile.

  KEYS[1] pending   KEYS[2] active   KEYS[3] delayed   KEYS[4] counters   KEYS[5] parked
  ARGV[1] jobId
  ARGV[2] counter to increment ('retries', 'deferred'), or ''
  ARGV[3] '1' when parked for a pause

  Returns 1 when the job is still pending, 0 when it had already finished.
]]
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
if ARGV[3] == '1' then redis.call('SADD', KEYS[5], ARGV[1]) end
if ARGV[2] ~= '' then redis.call('HINCRBY', KEYS[4], ARGV[2], 1) end
return 1
