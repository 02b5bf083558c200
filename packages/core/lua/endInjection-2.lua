--[[
  A seeding run or a replay is over (or its lease lapsed: the reconciler ends it): the crawl may be
  marked done again once its partitions are idle.

  KEYS[1] meta   KEYS[2] seeding
  ARGV[1] injection id
  Returns 1 when the injection was still open.
]]
local open = redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'gen', 1)
return open
