--[[
  Work is about to be brought into a crawl from outside its jobs: a seeding run, a replay. Until
  endInjection-2.lua, the crawl cannot be marked done (markDone-2.lua), even while none of its
  partitions has anything pending; and the change of `gen` tells a done check that began before this
  that what it saw is out of date.

  KEYS[1] meta   KEYS[2] seeding: injection id -> when its lease lapses (ms, by Redis's clock)
  ARGV[1] injection id   ARGV[2] the lease's length (ms)
  ARGV[3] '1' to run the crawl again if it had ended done or failed (a replay)

  The lease runs on Redis's clock, the one every process of the fleet shares: a seeder on a
  machine whose clock is behind the reconciler's must not look dead. Called again to renew.
  Returns {the crawl's state after it, its gen}: a replay stamps the partitions' copies of the state
  with gen (markPartDone-1.lua).
]]
local t = redis.call('TIME')
redis.call('HSET', KEYS[2], ARGV[1], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2]))
local gen = redis.call('HINCRBY', KEYS[1], 'gen', 1)
local state = redis.call('HGET', KEYS[1], 'state')
if ARGV[3] == '1' and (state == 'done' or state == 'failed') then
  redis.call('HSET', KEYS[1], 'state', 'running')
  redis.call('HDEL', KEYS[1], 'finishedAt')
  state = 'running'
end
return {state or '', gen}
