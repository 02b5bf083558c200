--[[
  A worker takes a job: reads the crawl's state and, if the crawl runs, marks the job active.

  KEYS[1] meta      the crawl's meta hash
  KEYS[2] pending   the stage's pending set
  KEYS[3] active    the stage's active set
  KEYS[4] delayed   the stage's delayed set
  ARGV[1] jobId

  Returns {state, spiderVersion, startedAt}. state is the crawl's state, or 'unknown' when the crawl
  does not exist (reset), or 'finished' when this job already finished (a re-run after a crash).
  startedAt tells a crawl registered again after a reset from the one before it.
]]
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {'unknown', ''} end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then return {'finished', ''} end
if state == 'running' then
  redis.call('SREM', KEYS[4], ARGV[1])
  redis.call('SADD', KEYS[3], ARGV[1])
elseif state ~= 'paused' then
  -- a cancelled or ended crawl: the worker drops the job, which is parked no more
  redis.call('SREM', KEYS[4], ARGV[1])
end
local version, startedAt = unpack(redis.call('HMGET', KEYS[1], 'version', 'startedAt'))
return {state, version or '', startedAt or ''}
