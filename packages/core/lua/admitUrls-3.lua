--[[
  Admits discovered URLs to a crawl's frontier, once each, whatever number of parsers find them at once.

  KEYS[1] urls      hash: fingerprint -> state ('q' queued, 'd' fetched, 'S' out of scope,
                     'D' beyond maxDepth, 'L' beyond maxPages, 'R' disallowed by robots.txt)
  KEYS[2] counters  hash: seen, skipped
  KEYS[3] pending   set: fetch job ids enqueued and not finished

  ARGV[1] maxPages  0 for no limit
  ARGV[2..]         triples: fingerprint, fetch job id, verdict ('a' admit, 's' out of scope, 'd' too deep)

  Returns one code per URL: 1 newly admitted (enqueue it), 2 admitted earlier and still unfinished
  (enqueue again: the job id makes that a no-op unless the job was lost), 0 nothing to do.
  A URL refused for depth can still be admitted later, when a shorter path to it is found.
]]
local urls, counters, pending = KEYS[1], KEYS[2], KEYS[3]
local maxPages = tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV, 3 do
  local fp, jobId, verdict = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local state = redis.call('HGET', urls, fp)
  local code = 0
  if verdict == 'a' then
    if state == false or state == 'D' then
      local seen = tonumber(redis.call('HGET', counters, 'seen') or '0')
      if maxPages > 0 and seen >= maxPages then
        if state == false then
          redis.call('HSET', urls, fp, 'L')
          redis.call('HINCRBY', counters, 'skipped', 1)
        end
      else
        if state == 'D' then redis.call('HINCRBY', counters, 'skipped', -1) end
        redis.call('HSET', urls, fp, 'q')
        redis.call('HINCRBY', counters, 'seen', 1)
        redis.call('SADD', pending, jobId)
        code = 1
      end
    elseif state == 'q' and redis.call('SISMEMBER', pending, jobId) == 1 then
      code = 2
    end
  elseif state == false then
    redis.call('HSET', urls, fp, verdict == 'd' and 'D' or 'S')
    redis.call('HINCRBY', counters, 'skipped', 1)
  end
  out[#out + 1] = code
end
return out
