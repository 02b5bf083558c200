--[[
  Marks a running crawl done if nothing of it is pending and its frontier is empty (after a seed
  that admitted nothing new, or a resume).

  KEYS[1] meta   KEYS[2..4] the pending sets of fetch, parse and write   KEYS[5] frontier
  ARGV[1] now, ISO 8601
  Returns 1 when the crawl is now done.
]]
--!include markDoneIfIdle.lua
return markDoneIfIdle(KEYS[1], {KEYS[2], KEYS[3], KEYS[4]}, KEYS[5], ARGV[1])
