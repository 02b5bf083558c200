--[[
  A seeding run or a replay is over (or its lease lapsed: the reconciler ends it): the crawl may be
  marked done again once its partitions are idle.

  KEYS[1] meta   KEYS[2] seeding
  ARGV[1] injection id
  ARGV[2] '1': only if its lease has lapsed by Redis's clock (the reconciler's call)
  Returns 1 when the injection was still open and is now ended.
]]
if ARGV[2] == '1' then
  local t = redis.call('TIME')
  local leaseEnd = tonumber(redis.call('HGET', KEYS[2], ARGV[1]))
  if not leaseEnd or leaseEnd > tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then return 0 end
end
local open = redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'gen', 1)
return open
