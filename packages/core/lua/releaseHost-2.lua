--[[
  A request has ended: give back its host lease and learn from it. (The proxy's outcome is
  proxyOutcome-1.lua's, in the proxies' slot.)

  KEYS[1] host hash   KEYS[2] host leases
  ARGV[1] lease id
  ARGV[2] latency (ms), or '' when there was no response
  ARGV[3] hold the host this long (ms) from now (Retry-After), or ''
  ARGV[4] the host's new AutoThrottle delay (ms), or ''
  ARGV[5] the longest hold (ms) ARGV[3] may set (retry.maxRetryAfterMs); an older, longer hold is
          brought down to it too
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local host = KEYS[1]
redis.call('ZREM', KEYS[2], ARGV[1])
if ARGV[2] ~= '' then
  local latency = tonumber(ARGV[2])
  local lat = tonumber(redis.call('HGET', host, 'lat'))
  redis.call('HSET', host, 'lat', lat and (lat * 0.8 + latency * 0.2) or latency)
end
if ARGV[3] ~= '' then
  local ceiling = now + tonumber(ARGV[5])
  local hold = math.min(now + tonumber(ARGV[3]), ceiling)
  local current = tonumber(redis.call('HGET', host, 'hold')) or 0
  if hold > current or current > ceiling then redis.call('HSET', host, 'hold', hold) end
end
if ARGV[4] ~= '' then redis.call('HSET', host, 'delay', ARGV[4]) end
return 'ok'
