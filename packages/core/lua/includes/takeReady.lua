-- Feeds the fetch stage from the hosts that are ready (hosts.lua). While the crawl runs and the
-- partition's window has at least `minBatch` places free, the hosts whose turn comes within
-- `horizon` ms are taken in the order of their turns; each gives up to its free concurrency, one URL
-- per turn, its turns spaced by hostSpacing(g). A URL whose turn is later than now goes out with the
-- wait before its turn (a BullMQ delayed job), so a polite host's next URL is on its way without a
-- timer, and a fetcher rarely has to park a job for its host. Its fetch request moves to `requests`
-- (for the reconciler) and its job id into the fetch stage's pending set.
--
-- K: part, pendingFetch, requests, hosts, ready, backlog, queuePrefix, crawlId.
-- Returns {job id, request, wait ms, ...} for the caller to add to the fetch queue. A caller that
-- dies before adding them leaves pending ids with no job, which the reconciler rebuilds.

-- A request as its host's queue keeps it (queuedRequest: `~` for `http://<host>`, `^` for
-- `https://<host>`), written out in full.
local function expandRequest(request, host)
  local depth, mark, rest = string.match(request, '^(%d+) ([~^])(.*)$')
  if not depth then return request end
  return depth .. ' ' .. (mark == '~' and 'http://' or 'https://') .. host .. rest
end

-- The URL of a fetch request (encodeRequest: `<depth> <url>`, maybe a line of JSON after it).
local function urlOfRequest(request)
  return string.match(request, '^%d+ ([^\n]+)')
end

local function takeReady(K, now, window, minBatch, horizon)
  if window <= 0 or redis.call('HGET', K.part, 'state') ~= 'running' then return {} end
  local room = window - redis.call('SCARD', K.pendingFetch)
  if room < math.max(1, minBatch) then return {} end
  local due = redis.call('ZRANGEBYSCORE', K.ready, '-inf', now + horizon, 'LIMIT', 0, room)
  local out, ids, requests = {}, {}, {}
  local taken = 0
  for _, host in ipairs(due) do
    if room <= 0 then break end
    local st = readHost(K.hosts, host)
    local queueKey = K.queuePrefix .. host
    local waiting = redis.call('LLEN', queueKey)
    if st then
      local want = math.min(st.c - st.i, room, waiting)
      local step = hostSpacing(st.g)
      local at = math.max(now, st.n, st.h)
      local turns = {}
      while #turns < want and at <= now + horizon do
        turns[#turns + 1] = at
        at = at + step
      end
      if #turns > 0 then
        local entries = redis.call('LPOP', queueKey, #turns)
        for j, queued in ipairs(entries) do
          local request = expandRequest(queued, host)
          -- A URL's fingerprint: sha1 of the crawl id and the URL, as urlFingerprint computes it.
          local fp = string.sub(redis.sha1hex(K.crawlId .. '\n' .. urlOfRequest(request)), 1, 32)
          ids[#ids + 1] = 'f' .. fp
          requests[#requests + 1] = fp
          requests[#requests + 1] = request
          out[#out + 1] = 'f' .. fp
          out[#out + 1] = request
          out[#out + 1] = tostring(math.max(0, math.floor(turns[j] - now)))
        end
        st.i = st.i + #entries
        st.n = at
        room = room - #entries
        taken = taken + #entries
        waiting = waiting - #entries
        if waiting > 0 then redis.call('ZINCRBY', K.backlog, -#entries, host) else redis.call('ZREM', K.backlog, host) end
        writeHost(K.hosts, host, st)
      end
      scheduleHost(K.ready, host, st, waiting)
    else
      -- A host without state has nothing to give (a reset raced this take): leave the schedule.
      redis.call('ZREM', K.ready, host)
    end
  end
  if #ids > 0 then
    for i = 1, #ids, 1000 do redis.call('SADD', K.pendingFetch, unpack(ids, i, math.min(i + 999, #ids))) end
    for i = 1, #requests, 2000 do redis.call('HSET', K.requests, unpack(requests, i, math.min(i + 1999, #requests))) end
    redis.call('HINCRBY', K.part, 'q', -taken)
  end
  return out
end
