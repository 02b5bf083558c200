--[[
  Admits discovered URLs to one partition of a crawl's frontier, once each, whatever number of
  parsers find them at once; then feeds the fetch stage from the partition's ready hosts.

  KEYS[1] part      the partition hash (state copy, q: URLs waiting, epoch, the index's level)
  KEYS[2] counters  the partition's counters: seen, skipped
  KEYS[3] pending   set: the partition's fetch job ids enqueued and not finished
  KEYS[4] requests  hash: fingerprint -> fetch request of a URL taken into the fetch stage
  KEYS[5] hosts     hash: host -> packed state (hosts.lua)
  KEYS[6] ready     sorted set: hosts by their next turn
  KEYS[7] backlog   sorted set: hosts by their waiting URLs

  ARGV[1] maxPages: 0 for no limit (a crawl with maxPages has one partition, so `seen` is the crawl's)
  ARGV[2] maxPagesPerHost: 0 for no limit
  ARGV[3] window: the most fetch jobs of the partition pending at once; 0 takes none
  ARGV[4] the fewest free places worth a take
  ARGV[5] horizon (ms): how far ahead a host's turn may be to be handed out now
  ARGV[6] the prefix of the index's bucket keys (urlIndex.lua)
  ARGV[7] the prefix of the host queue keys (hosts.lua)
  ARGV[8] the crawl id (a taken URL's job is named by its fingerprint, sha1 of the id and the URL)
  ARGV[9] the run of the crawl the caller works for (its startedAt), or '' for any: a caller of an
          older run (the crawl was reset, and maybe registered again, under it) changes nothing
  ARGV[10..] groups, one per host: host, its concurrency, its delay (ms), n, then n pairs:
            fingerprint, then the verdict ('a' admit, 's' out of scope, 'd' too deep) followed, for
            'a', by the fetch request (encodeRequest). Each fingerprint at most once (the caller
            removes duplicates).

  Returns {codes, skipped, taken}: one code per URL in the order given, 1 newly admitted (into its
  host's queue), 2 admitted earlier and still pending in the fetch stage (enqueue again: the job id
  makes that a no-op unless the job was lost), 0 nothing to do; how much the call changed the
  `skipped` counter; and the {job id, request, wait ms, ...} triples the call took into the
  fetch stage (takeReady.lua). A URL refused for depth can still be admitted later, by a shorter path.
  Returns {{}, 0, {}, 1} to a caller of another run: nothing admitted, nothing changed; and to a
  caller after the crawl is done (or failed), as its partition's copy of the state says: a job whose
  lock expired, and whose re-run finished it before the crawl was done, admits its links late; its
  re-run admitted the same ones (docs/architecture.md, "Work that arrives after done").

  A URL over maxPages is recorded 'L', over its host's maxPagesPerHost 'H', and counted skipped.
]]
--!include urlStates.lua
--!include urlIndex.lua
--!include hosts.lua
--!include takeReady.lua
local partKey, counters, pending, requests, hostsKey, ready, backlog = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local maxPages, maxPerHost = tonumber(ARGV[1]), tonumber(ARGV[2])
local queuePrefix = ARGV[7]
if ARGV[9] ~= '' and redis.call('HGET', partKey, 'startedAt') ~= ARGV[9] then return {{}, 0, {}, 1} end
local partState = redis.call('HGET', partKey, 'state')
if partState == 'done' or partState == 'failed' then return {{}, 0, {}, 1} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local index = openUrlIndex(partKey, ARGV[6])

local seen = maxPages > 0 and tonumber(redis.call('HGET', counters, 'seen') or '0') or 0
local codes, admitted, skipped = {}, 0, 0
local at = 10
while at <= #ARGV do
  local host, concurrency, delay, n = ARGV[at], tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
  at = at + 4
  -- A host seen for the first time takes the spider's policy; later, what its fetches report.
  local st = readHost(hostsKey, host) or {i = 0, c = math.max(1, concurrency), g = delay, n = now, h = 0, a = 0}
  local entries = {}
  for _ = 1, n do
    local fp, tail = ARGV[at], ARGV[at + 1]
    at = at + 2
    local verdict, code = string.sub(tail, 1, 1), 0
    if verdict == 'a' then
      -- What the URL becomes if it is new: admitted, or refused by a budget.
      local fresh = 'q'
      if maxPages > 0 and seen + admitted >= maxPages then
        fresh = 'L'
      elseif maxPerHost > 0 and st.a >= maxPerHost then
        fresh = 'H'
      end
      -- One command for a URL never seen (most seeds), two for one seen before.
      local state = not index.claim(fp, fresh) and index.get(fp)
      if state == false then
        if fresh == 'q' then
          entries[#entries + 1] = string.sub(tail, 2)
          st.a = st.a + 1
          admitted = admitted + 1
          code = 1
        else
          skipped = skipped + 1
        end
      elseif state == 'D' and fresh ~= 'L' then
        -- Refused for depth before, found now by a shorter path.
        index.set(fp, fresh)
        if fresh == 'q' then
          skipped = skipped - 1
          entries[#entries + 1] = string.sub(tail, 2)
          st.a = st.a + 1
          admitted = admitted + 1
          code = 1
        end
      elseif state == 'q' and redis.call('SISMEMBER', pending, 'f' .. fp) == 1 then
        code = 2
      end
    elseif index.claim(fp, verdict == 'd' and 'D' or 'S') then
      skipped = skipped + 1
    end
    codes[#codes + 1] = code
  end
  if #entries > 0 then
    local queueKey = queuePrefix .. host
    for i = 1, #entries, 1000 do redis.call('RPUSH', queueKey, unpack(entries, i, math.min(i + 999, #entries))) end
    redis.call('ZINCRBY', backlog, #entries, host)
    writeHost(hostsKey, host, st)
    scheduleHost(ready, host, st, redis.call('LLEN', queueKey))
  end
end
index.flush()
if admitted ~= 0 then
  redis.call('HINCRBY', counters, 'seen', admitted)
  redis.call('HINCRBY', partKey, 'q', admitted)
  redis.call('HINCRBY', partKey, 'epoch', 1)
end
if skipped ~= 0 then redis.call('HINCRBY', counters, 'skipped', skipped) end
local K = {part = partKey, pendingFetch = pending, requests = requests, hosts = hostsKey, ready = ready, backlog = backlog, queuePrefix = queuePrefix, crawlId = ARGV[8]}
return {codes, skipped, takeReady(K, now, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]))}
