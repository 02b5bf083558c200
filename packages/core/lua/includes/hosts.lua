-- A partition's hosts, the frontier's unit of fairness (Mercator's back queues). Each host has:
-- - a queue of waiting URLs, the list `<queuePrefix><host>`: each URL's fetch request
--   (`<depth> <url>`, and a line of JSON with the rest when there is any; `http://<host>` written
--   `~`, `https://<host>` `^`), oldest first;
-- - a state in the `hosts` hash, packed "i:c:g:n:h:a": i its URLs in the fetch stage now (pending
--   fetch jobs), c its concurrency (concurrencyPerHost), g its delay between starts (ms, the
--   spider's, raised by robots.txt's Crawl-delay and AutoThrottle as fetchers report them), n when
--   its next URL may start (ms), h a Retry-After hold (ms), a the URLs ever admitted for it
--   (limits.maxPagesPerHost);
-- - a place in the `ready` sorted set, scored by max(n, h), while URLs wait and i < c: the fetch
--   stage is fed from the front of it (takeReady.lua), so a host holds about its concurrency's worth
--   of the fetch stage, and each host waits only for its own turn;
-- - a place in the `backlog` sorted set, scored by its waiting URLs (status's busiest hosts).
--!include hostSpacing.lua

local function readHost(hostsKey, host)
  local packed = redis.call('HGET', hostsKey, host)
  if not packed then return nil end
  local i, c, g, n, h, a = string.match(packed, '^(%d+):(%d+):(%d+):(%d+):(%d+):(%d+)$')
  return {i = tonumber(i), c = tonumber(c), g = tonumber(g), n = tonumber(n), h = tonumber(h), a = tonumber(a)}
end

local function writeHost(hostsKey, host, st)
  redis.call('HSET', hostsKey, host, string.format('%d:%d:%d:%d:%d:%d', st.i, st.c, st.g, st.n, st.h, st.a))
end

-- A host's place in the ready schedule, after its state or queue changed.
local function scheduleHost(readyKey, host, st, waiting)
  if waiting > 0 and st.i < st.c then
    redis.call('ZADD', readyKey, math.max(st.n, st.h), host)
  else
    redis.call('ZREM', readyKey, host)
  end
end
