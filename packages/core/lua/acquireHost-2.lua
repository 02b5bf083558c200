--[[
  May one request start now on this host? Fleet-wide and atomic: every fetcher on every machine asks
  here, and the clock is Redis's own (TIME), not the caller's. A host's keys share one slot,
  `{polite:<n>}` by the host's hash (keys.ts), so hosts spread over a cluster's shards; a request
  through a proxy then takes the proxy's request in takeProxy-v.lua (the proxies' slot), and gives
  the host back with undoHost-2.lua when no proxy may send it yet.

  KEYS[1]  host hash: last (last start, ms), q:<line> (end of one crawl's line of deferred requests), hold
           (Retry-After: nothing starts before it), delay (AutoThrottle's delay), lat (latency EWMA)
  KEYS[2]  host leases (sorted set: lease id -> expiry), one per request in flight
  ARGV[1]  lease id (the job id)
  ARGV[2]  lease lifetime (ms): a crashed fetcher's lease expires after it
  ARGV[3]  concurrencyPerHost
  ARGV[4]  the delay between two starts on this host (ms), before AutoThrottle and jitter
  ARGV[5]  jitter factor for this request (1, or 0.5..1.5 with randomizeDelay)
  ARGV[6]  AutoThrottle: '1' to use the host's adapted delay, bounded by ARGV[7]
  ARGV[7]  AutoThrottle's maximum delay (ms)
  ARGV[8]  deferrals: how many times this job has waited already (0 for a newcomer)
  ARGV[9]  the longest hold this caller obeys (ms from now, retry.maxRetryAfterMs): a longer hold,
           set by another crawl or an older fleet, counts as this long
  ARGV[10] the line to join (the crawl id): each crawl queues in its own line, so a crawl that is
           cancelled or paused with a crowd of deferred jobs does not push every other crawl's
           newcomers hours back; the host's delay and concurrency still bind all of them together

  Returns {1, 0, delayMs, previousLast, now} to go: the lease is taken and the host's last start is
  now (undoHost-2.lua puts previousLast back). Returns {0, waitMs, reason} to wait; nothing is
  taken. A newcomer that must wait joins the end of the host's line, so a crowd of deferred jobs
  comes back spread out instead of all at once; a job that has waited before comes back at the
  earliest moment, backing off while the host stays full.
]]
--!include hostSpacing.lua
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local host, leases = KEYS[1], KEYS[2]
local leaseMs = tonumber(ARGV[2])
local concurrency = tonumber(ARGV[3])
local baseDelay = tonumber(ARGV[4])
local jitter = tonumber(ARGV[5])
local deferrals = tonumber(ARGV[8])
local lineField = 'q:' .. (ARGV[10] or '')

local h = redis.call('HMGET', host, 'last', lineField, 'hold', 'delay', 'lat')
local last = tonumber(h[1])
local hostQ = tonumber(h[2]) or 0
local hold = math.min(tonumber(h[3]) or 0, now + tonumber(ARGV[9]))
local delay = baseDelay
if ARGV[6] == '1' then
  delay = math.max(baseDelay, math.min(tonumber(h[4]) or baseDelay, tonumber(ARGV[7])))
end
-- A little over the delay (hostSpacing.lua), the spacing the frontier hands out a host's URLs by.
local gap = hostSpacing(delay * jitter)
local latency = tonumber(h[5]) or 0
-- how far apart deferred requests are spread: the delay, or the time a slot takes to free up
-- (at least 5 ms, so a crowd for a host of unknown latency does not come back at one instant)
local spacing = math.max(gap, latency / concurrency, 5)

local function defer(at, lineKey, lineQ, step, reason)
  if deferrals == 0 then
    if lineQ > at then at = lineQ end
    redis.call('HSET', lineKey, lineField, at + step)
  end
  return {0, math.max(1, math.ceil(at - now)), reason}
end

redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
local earliest, reason = now, ''
if hold > earliest then earliest, reason = hold, 'retry-after' end
if last and last + gap > earliest then earliest, reason = last + gap, 'delay' end
if redis.call('ZCARD', leases) >= concurrency then
  -- When a slot frees is unknown: wait about one slot's time, longer each time the host is still full.
  local backoff = math.min(math.max(spacing, 20) * math.pow(2, math.min(math.max(deferrals - 1, 0), 6)), 5000)
  if now + backoff > earliest then earliest, reason = now + backoff, 'concurrency' end
end
if earliest > now then return defer(earliest, host, hostQ, spacing, reason) end

local previous = h[1] or ''
redis.call('HSET', host, 'last', now)
redis.call('ZADD', leases, now + leaseMs, ARGV[1])
redis.call('PEXPIRE', host, 86400000)
redis.call('PEXPIRE', leases, leaseMs + 60000)
return {1, 0, tostring(delay), previous, tostring(now)}
