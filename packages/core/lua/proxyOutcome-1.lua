--[[
  Records how a request through a proxy went: its health, and a ban after too many failures in a row.

  KEYS[1] proxy hash
  ARGV[1] outcome: 'ok', 'fail' (the proxy itself failed), 'block' (the site blocked it), or ''
  ARGV[2] latency (ms), or ''
  ARGV[3] banAfterFailures: consecutive failures that ban the proxy
  ARGV[4] when a banned proxy is first probed (ms from now)

  Returns 'banned' when this failure banned the proxy, else 'ok'.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local proxy, outcome = KEYS[1], ARGV[1]
if outcome == '' then return 'ok' end
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
if consecutive >= tonumber(ARGV[3]) and redis.call('HGET', proxy, 'banned') ~= '1' then
  redis.call('HSET', proxy, 'banned', '1', 'bannedAt', now, 'probeAt', now + tonumber(ARGV[4]))
  redis.call('HINCRBY', proxy, 'bans', 1)
  return 'banned'
end
return 'ok'
