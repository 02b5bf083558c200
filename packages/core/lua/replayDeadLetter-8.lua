--[[
  Sends one dead letter back to work (`crawlfleet replay`), once: its record leaves the dead-letter
  set, its failure is taken off the counters, and its job becomes pending again. (The crawl is
  reopened by the replay's injection, beginInjection-2.lua, around this.)

  KEYS[1] dead      KEYS[2] counters   KEYS[3] part   KEYS[4] pending (of the stage it goes back to)
  KEYS[5] requests  KEYS[6] rebuilds   KEYS[7] hosts   KEYS[8] ready
  ARGV[1] the dead letter's job id
  ARGV[2] the stage it was dead-lettered in
  ARGV[3] the job id to run again (the URL's fetch job, or its write job)
  ARGV[4] the URL's fetch request (JSON) when it goes back to fetch, else ''
  ARGV[5] the prefix of the index's bucket keys
  ARGV[6] the URL's host, when it goes back to fetch   ARGV[7] the prefix of the host queue keys

  A URL fetched again does not count again for the stages it had finished (the 'r:' record that
  finishJob-12.lua reads), so `fetched` stays one per URL.
  Returns 1 when replayed, 0 when the record was gone (replayed already).
]]
--!include urlIndex.lua
--!include hosts.lua
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], 'failed', -1)
redis.call('HINCRBY', KEYS[2], 'dead.' .. ARGV[2], -1)
redis.call('HINCRBY', KEYS[2], 'replayed', 1)
local fp = string.sub(ARGV[3], 2)
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[5], fp, ARGV[4])
  redis.call('HSETNX', KEYS[6], 'r:' .. fp, openUrlIndex(KEYS[3], ARGV[5]).get(fp) or 'q')
end
if redis.call('SADD', KEYS[4], ARGV[3]) == 1 and ARGV[4] ~= '' then
  local host = ARGV[6]
  local st = readHost(KEYS[7], host) or {i = 0, c = 1, g = 0, n = 0, h = 0, a = 1}
  st.i = st.i + 1
  writeHost(KEYS[7], host, st)
  scheduleHost(KEYS[8], host, st, redis.call('LLEN', ARGV[7] .. host))
end
redis.call('HINCRBY', KEYS[3], 'epoch', 1)
return 1
