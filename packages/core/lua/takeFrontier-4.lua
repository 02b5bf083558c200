--[[
  Moves URLs from a running crawl's frontier into the fetch stage while its window has room (see
  takeFrontier.lua): after a resume, and as the reconciler's backstop.

  KEYS[1] meta   KEYS[2] frontier   KEYS[3] the fetch pending set   KEYS[4] requests
  ARGV[1] window: the most fetch jobs of the crawl pending at once
  ARGV[2] the fewest free places worth a take

  Returns {job id, request JSON, ...} to add to the fetch queue.
]]
--!include takeFrontier.lua
return takeFrontier(KEYS[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[1]), tonumber(ARGV[2]))
