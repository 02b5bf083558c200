--[[
  May this request go through one of these proxies now? (After acquireHost-2.lua granted its host.)
  A proxy's rate is a GCRA: a request may start when the proxy's theoretical arrival time, less the
  burst's tolerance, has come. Every proxy's keys share the slot `{polite}`.

  KEYS[1..]  proxy hashes, in the caller's order of preference (it has scored their health already):
             tat (GCRA theoretical arrival time), q:<line> (end of one crawl's line), used (last start)
  ARGV[1]  requests per second per proxy (0: no limit)
  ARGV[2]  burst per proxy
  ARGV[3]  deferrals: how many times this job has waited already (0 for a newcomer)
  ARGV[4]  the line to join (the crawl id), as in acquireHost-2.lua

  Returns {1, proxyIndex} to go: the proxy's request is taken. Returns {0, waitMs, 'proxy-rate'} to
  wait (the caller gives its host back); a newcomer joins the end of the soonest proxy's line.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local deferrals = tonumber(ARGV[3])
local lineField = 'q:' .. (ARGV[4] or '')
local proxyIndex = 0
local proxies = #KEYS
if proxies > 0 then
  if rate <= 0 then
    proxyIndex = 1
  else
    local interval = 1000 / rate
    local tolerance = (burst - 1) * interval
    local bestAt, best, bestQ
    for i = 1, proxies do
      local p = redis.call('HMGET', KEYS[i], 'tat', lineField)
      local tat = math.max(tonumber(p[1]) or now, now)
      if tat - tolerance <= now then
        proxyIndex = i
        redis.call('HSET', KEYS[i], 'tat', tat + interval)
        break
      end
      local q = tonumber(p[2]) or 0
      local at = tat - tolerance
      if deferrals == 0 and q > at then at = q end
      if not bestAt or at < bestAt then bestAt, best, bestQ = at, i, q end
    end
    if proxyIndex == 0 then
      if deferrals == 0 then
        if bestQ > bestAt then bestAt = bestQ end
        redis.call('HSET', KEYS[best], lineField, bestAt + interval)
      end
      return {0, math.max(1, math.ceil(bestAt - now)), 'proxy-rate'}
    end
  end
  redis.call('HSET', KEYS[proxyIndex], 'used', now)
end

return {1, proxyIndex}
