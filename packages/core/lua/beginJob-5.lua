--[[
  A worker takes a job: reads the crawl's state (the partition's copy) and, if the crawl runs,
  marks the job active.

  KEYS[1] part      the partition hash: state, version, startedAt
  KEYS[2] pending   the stage's pending set
  KEYS[3] active    the stage's active set
  KEYS[4] delayed   the stage's delayed set
  KEYS[5] the previous stage's pending set (the fetch stage's own for a fetch job)
  ARGV[1] jobId
  ARGV[2] the job that hands this one its URL (a parse job's fetch job, a write job's parse job), or ''

  Returns {state, spiderVersion, startedAt}. state is the crawl's state; 'unknown' when the crawl
  (or this partition of it) does not exist; 'finished' when this job already finished (a re-run after
  a crash); 'early' when it is not pending yet but the job handing it over still is (a job added by
  hand, or one whose hand-over a Redis failover lost with the last writes of its slot): it waits,
  while the crawl runs or is paused. In a crawl that ended, such a job gets the crawl's state: its
  worker drops it (the reconciler runs a crawl found done with work pending again: a failover lost
  the finish that would hand it over), rather than re-parking it every second for ever.
  startedAt tells a crawl registered again after a reset from the one before it.
]]
local m = redis.call('HMGET', KEYS[1], 'state', 'version', 'startedAt')
local state, version, startedAt = m[1], m[2] or '', m[3] or ''
if not state then return {'unknown', '', ''} end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then
  local live = state == 'running' or state == 'paused'
  if live and ARGV[2] ~= '' and redis.call('SISMEMBER', KEYS[5], ARGV[2]) == 1 then return {'early', version, startedAt} end
  if not live then return {state, version, startedAt} end
  return {'finished', version, startedAt}
end
if state == 'running' then
  redis.call('SREM', KEYS[4], ARGV[1])
  redis.call('SADD', KEYS[3], ARGV[1])
elseif state ~= 'paused' then
  -- a cancelled crawl: the worker drops the job, which is parked no more
  redis.call('SREM', KEYS[4], ARGV[1])
end
return {state, version, startedAt}
