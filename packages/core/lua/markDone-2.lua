--[[
  Marks a running crawl done, after a check from outside its partitions saw every partition idle
  (nothing pending, nothing waiting) twice, with no partition's epoch changed between the two reads
  (packages/crawl/src/completion.ts says why that is exact). The crawl's `gen` must not have changed
  since before that check, and no seeding run or replay may be open: those bring work from outside
  the crawl's jobs, and the check may have looked before it arrived.

  KEYS[1] meta   KEYS[2] seeding
  ARGV[1] the crawl's gen when the check began   ARGV[2] now, ISO 8601
  Returns 1 when the crawl is now done.
]]
local m = redis.call('HMGET', KEYS[1], 'state', 'gen')
if m[1] ~= 'running' or (m[2] or '0') ~= ARGV[1] then return 0 end
if redis.call('HLEN', KEYS[2]) > 0 then return 0 end
redis.call('HSET', KEYS[1], 'state', 'done', 'finishedAt', ARGV[2])
return 1
