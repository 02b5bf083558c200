--[[
  Admits discovered URLs to a crawl's frontier, once each, whatever number of parsers find them at once.

  KEYS[1] urls      the seen-URL index (urlIndex.lua): fingerprint -> state ('q' queued, then 'd'
                     fetched, 'p' parsed, 'w' written, each stage's done marker; 'S' out of scope, 'D'
                     beyond maxDepth, 'L' beyond maxPages, 'R' disallowed by robots.txt)
  KEYS[2] counters  hash: seen, skipped
  KEYS[3] pending   set: fetch job ids enqueued and not finished
  KEYS[4] requests  hash: fingerprint -> the fetch request of a URL in flight (for the reconciler)
  KEYS[5] frontier  list: fingerprints of admitted URLs not yet taken into the fetch stage
  KEYS[6] meta      the crawl's meta hash (a take needs the crawl running)

  ARGV[1] maxPages  0 for no limit
  ARGV[2] window    the most fetch jobs of the crawl pending at once (takeFrontier.lua); 0 takes none
  ARGV[3] the fewest free places worth a take
  ARGV[4..]         pairs: fingerprint (its fetch job id is 'f' .. fingerprint), then the verdict ('a'
                    admit, 's' out of scope, 'd' too deep) followed, for 'a', by the request JSON; each
                    fingerprint at most once (the caller removes duplicates)

  Returns {codes, skipped, taken}: one code per URL, 1 newly admitted (into the frontier), 2 admitted
  earlier and still pending in the fetch stage (enqueue again: the job id makes that a no-op unless
  the job was lost), 0 nothing to do; how much the call changed the `skipped` counter; and the
  {job id, request JSON, ...} pairs taken from the frontier's head, for the caller to enqueue.
  A URL refused for depth can still be admitted later, when a shorter path to it is found.

  Writes go in a few multi-field commands (HSET, SADD, RPUSH) rather than a handful per URL, and the
  index reads each bucket once: the script holds Redis for every client while it runs.
]]
--!include urlIndex.lua
--!include takeFrontier.lua
local counters, pending, requests, frontier = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local maxPages = tonumber(ARGV[1])
local FIRST = 4
local n = (#ARGV - FIRST + 1) / 2
local index = openUrlIndex(KEYS[1])

-- One command over a long list, in slices that stay within Lua's unpack limit.
local function sliced(command, key, list)
  local out = {}
  for i = 1, #list, 1000 do
    local part = redis.call(command, key, unpack(list, i, math.min(i + 999, #list)))
    if type(part) == 'table' then
      for _, v in ipairs(part) do out[#out + 1] = v end
    end
  end
  return out
end

local fps, verdicts, ids, bodies = {}, {}, {}, {}
for i = 1, n do
  local at = FIRST + 2 * (i - 1)
  local fp, tail = ARGV[at], ARGV[at + 1]
  fps[i], ids[i], verdicts[i], bodies[i] = fp, 'f' .. fp, string.sub(tail, 1, 1), string.sub(tail, 2)
end
index.load(fps)
local states = {}
for i = 1, n do states[i] = index.get(fps[i]) end

-- Which of the queued ones are still unfinished.
local queuedAt, queuedIds = {}, {}
for i = 1, n do
  if verdicts[i] == 'a' and states[i] == 'q' then
    queuedAt[#queuedAt + 1] = i
    queuedIds[#queuedIds + 1] = ids[i]
  end
end
local unfinished = {}
local members = sliced('SMISMEMBER', pending, queuedIds)
for j, i in ipairs(queuedAt) do unfinished[i] = members[j] == 1 end

local seen = tonumber(redis.call('HGET', counters, 'seen') or '0')
local admitted, skipped = 0, 0
local queued, out, kept = {}, {}, {}
for i = 1, n do
  local state, code = states[i], 0
  if verdicts[i] == 'a' then
    if state == false or state == 'D' then
      if maxPages > 0 and seen + admitted >= maxPages then
        if state == false then
          index.set(fps[i], 'L')
          skipped = skipped + 1
        end
      else
        if state == 'D' then skipped = skipped - 1 end
        index.set(fps[i], 'q')
        queued[#queued + 1] = fps[i]
        kept[#kept + 1] = fps[i]
        kept[#kept + 1] = bodies[i]
        admitted = admitted + 1
        code = 1
      end
    elseif state == 'q' and unfinished[i] then
      code = 2
    end
  elseif state == false then
    index.set(fps[i], verdicts[i] == 'd' and 'D' or 'S')
    skipped = skipped + 1
  end
  out[i] = code
end
index.flush()
sliced('RPUSH', frontier, queued)
sliced('HSET', requests, kept)
if admitted ~= 0 then redis.call('HINCRBY', counters, 'seen', admitted) end
if skipped ~= 0 then redis.call('HINCRBY', counters, 'skipped', skipped) end
return {out, skipped, takeFrontier(KEYS[6], frontier, pending, requests, tonumber(ARGV[2]), tonumber(ARGV[3]))}
