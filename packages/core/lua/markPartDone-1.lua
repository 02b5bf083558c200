--[[
  Writes `done` into one partition's copy of the crawl's state, after markDone-2.lua marked the
  crawl done at generation ARGV[1]. The crawl's meta is in another slot, so this cannot look at it;
  it compares generations instead. Every write that runs the crawl again (registerCrawl-2.lua, a
  replay's beginInjection-2.lua) raises the crawl's `gen` and stamps the copy it writes with it
  (`stateGen`). A copy stamped with a later gen than the done check's was written by a run that
  began after the crawl was marked done: this late `done` belongs to the run before and is not
  written (else the crawl's record says running while every partition says done, and the run never
  ends). A partition that no longer exists (reset, gc) is not created again.

  KEYS[1] part   ARGV[1] the crawl's gen that markDone-2.lua saw
  Returns 1 when written.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local stamped = tonumber(redis.call('HGET', KEYS[1], 'stateGen') or '0') or 0
if stamped > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'state', 'done', 'stateGen', ARGV[1])
return 1
