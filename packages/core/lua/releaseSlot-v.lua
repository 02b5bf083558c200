--[[
  A request has ended: give back its host lease, learn from it, and record the proxy's outcome.

  KEYS[1] host hash   KEYS[2] host leases   KEYS[3] proxy hash (absent for a direct request)
  ARGV[1] lease id
  ARGV[2] latency (ms), or '' when there was no response
  ARGV[3] hold the host this long (ms) from now (Retry-After), or ''
  ARGV[4] the host's new AutoThrottle delay (ms), or ''
  ARGV[5] proxy outcome: 'ok', 'fail' (the proxy itself failed), 'block' (the site blocked it), or ''
  ARGV[6] banAfterFailures: consecutive failures that ban the proxy
  ARGV[7] when a banned proxy is first probed (ms from now)
  ARGV[8] the longest hold (ms) ARGV[3] may set (retry.maxRetryAfterMs); an older, longer hold is
          brought down to it too

  Returns 'banned' when this failure banned the proxy, else 'ok'.
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
  local ceiling = now + tonumber(ARGV[8])
  local hold = math.min(now + tonumber(ARGV[3]), ceiling)
  local current = tonumber(redis.call('HGET', host, 'hold')) or 0
  if hold > current or current > ceiling then redis.call('HSET', host, 'hold', hold) end
end
if ARGV[4] ~= '' then redis.call('HSET', host, 'delay', ARGV[4]) end

local proxy, outcome = KEYS[3], ARGV[5]
if not proxy or outcome == '' then return 'ok' end
if outcome == 'ok' then
  redis.call('HINCRBY', proxy, 'ok', 1)
  redis.call('HSET', proxy, 'consec', 0, 'lastOk', now)
  if ARGV[2] ~= '' then
    local lat = tonumber(redis.call('HGET', proxy, 'lat'))
    local latency = tonumber(ARGV[2])
    redis.call('HSET', proxy, 'lat', lat and (lat * 0.8 + latency * 0.2) or latency)
  end
  return 'ok'
end
redis.call('HINCRBY', proxy, 'fail', 1)
redis.call('HSET', proxy, 'lastFail', now)
if outcome == 'block' then
  -- A block lowers the proxy's success rate (its score); it does not ban a proxy that works.
  redis.call('HINCRBY', proxy, 'blocks', 1)
  return 'ok'
end
local consecutive = redis.call('HINCRBY', proxy, 'consec', 1)
if consecutive >= tonumber(ARGV[6]) and redis.call('HGET', proxy, 'banned') ~= '1' then
  redis.call('HSET', proxy, 'banned', '1', 'bannedAt', now, 'probeAt', now + tonumber(ARGV[7]))
  redis.call('HINCRBY', proxy, 'bans', 1)
  return 'banned'
end
return 'ok'
