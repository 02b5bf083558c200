--[[
  A job waits (a retry with backoff, or a paused crawl): it leaves the active set for the delayed set.

  KEYS[1] pending   KEYS[2] active   KEYS[3] delayed   KEYS[4] counters
  ARGV[1] jobId
  ARGV[2] counter to increment ('retries'), or ''

  Returns 1 when the job is still pending, 0 when it had already finished.
]]
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
if ARGV[2] ~= '' then redis.call('HINCRBY', KEYS[4], ARGV[2], 1) end
return 1
