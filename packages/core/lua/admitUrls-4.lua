--[[
  Admits discovered URLs to a crawl's frontier, once each, whatever number of parsers find them at once.

  KEYS[1] urls      hash: fingerprint -> state ('q' queued, then 'd' fetched, 'p' parsed, 'w' written,
                     each stage's done marker; 'S' out of scope, 'D' beyond maxDepth, 'L' beyond
                     maxPages, 'R' disallowed by robots.txt)
  KEYS[2] counters  hash: seen, skipped
  KEYS[3] pending   set: fetch job ids enqueued and not finished
  KEYS[4] requests  hash: fingerprint -> the fetch request of a URL in flight (for the reconciler)

  ARGV[1] maxPages  0 for no limit
  ARGV[2..]         quadruples: fingerprint, fetch job id, verdict ('a' admit, 's' out of scope, 'd' too
                    deep), request JSON; each fingerprint at most once (the caller removes duplicates)

  Returns {codes, skipped}: one code per URL, 1 newly admitted (enqueue it), 2 admitted earlier and
  still unfinished (enqueue again: the job id makes that a no-op unless the job was lost), 0 nothing
  to do; and how much the call changed the `skipped` counter.
  A URL refused for depth can still be admitted later, when a shorter path to it is found.

  Reads and writes go in a few multi-field commands (HMGET, SMISMEMBER, HSET, SADD) rather than a
  handful per URL: the script holds Redis for every client while it runs.
]]
local urls, counters, pending, requests = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local maxPages = tonumber(ARGV[1])
local n = (#ARGV - 1) / 4

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
  fps[i], ids[i], verdicts[i], bodies[i] = ARGV[4 * i - 2], ARGV[4 * i - 1], ARGV[4 * i], ARGV[4 * i + 1]
end
local states = sliced('HMGET', urls, fps)

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
local writes, adds, out, kept = {}, {}, {}, {}
local function mark(fp, state)
  writes[#writes + 1] = fp
  writes[#writes + 1] = state
end
for i = 1, n do
  local state, code = states[i], 0
  if verdicts[i] == 'a' then
    if state == false or state == 'D' then
      if maxPages > 0 and seen + admitted >= maxPages then
        if state == false then
          mark(fps[i], 'L')
          skipped = skipped + 1
        end
      else
        if state == 'D' then skipped = skipped - 1 end
        mark(fps[i], 'q')
        adds[#adds + 1] = ids[i]
        kept[#kept + 1] = fps[i]
        kept[#kept + 1] = bodies[i]
        admitted = admitted + 1
        code = 1
      end
    elseif state == 'q' and unfinished[i] then
      code = 2
    end
  elseif state == false then
    mark(fps[i], verdicts[i] == 'd' and 'D' or 'S')
    skipped = skipped + 1
  end
  out[i] = code
end
sliced('HSET', urls, writes)
sliced('SADD', pending, adds)
sliced('HSET', requests, kept)
if admitted ~= 0 then redis.call('HINCRBY', counters, 'seen', admitted) end
if skipped ~= 0 then redis.call('HINCRBY', counters, 'skipped', skipped) end
return {out, skipped}
