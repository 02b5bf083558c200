--[[
  Sends one dead letter back to work (`crawlfleet replay`), once: its record leaves the dead-letter
  set, its failure is taken off the counters, and its job becomes pending again.

  KEYS[1] dead      KEYS[2] counters   KEYS[3] meta   KEYS[4] pending (of the stage it goes back to)
  KEYS[5] requests  KEYS[6] rebuilds   KEYS[7] urls
  ARGV[1] the dead letter's job id
  ARGV[2] the stage it was dead-lettered in
  ARGV[3] the job id to run again (the URL's fetch job, or its write job)
  ARGV[4] the URL's fetch request (JSON) when it goes back to fetch, else ''

  A URL fetched again does not count again for the stages it had finished (the 'r:' record that
  finishJob-11.lua reads), so `fetched` stays one per URL. The crawl runs again if it had ended.
  Returns 1 when replayed, 0 when the record was gone (replayed already).
]]
--!include urlIndex.lua
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], 'failed', -1)
redis.call('HINCRBY', KEYS[2], 'dead.' .. ARGV[2], -1)
redis.call('HINCRBY', KEYS[2], 'replayed', 1)
local fp = string.sub(ARGV[3], 2)
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[5], fp, ARGV[4])
  redis.call('HSETNX', KEYS[6], 'r:' .. fp, openUrlIndex(KEYS[7]).get(fp) or 'q')
end
redis.call('SADD', KEYS[4], ARGV[3])
local state = redis.call('HGET', KEYS[3], 'state')
if state == 'done' or state == 'failed' then
  redis.call('HSET', KEYS[3], 'state', 'running')
  redis.call('HDEL', KEYS[3], 'finishedAt')
end
return 1
