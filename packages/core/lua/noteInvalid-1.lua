--[[
  Counts why items of a crawl were dropped as invalid: a sample for the spider's author.

  KEYS[1] the crawl's invalid-reasons hash (reason -> count)
  ARGV[1] how many distinct reasons to keep   ARGV[2..] one reason per dropped item

  A reason already kept is counted; a new one only while fewer than ARGV[1] are kept.
  Returns nothing.
]]
local limit = tonumber(ARGV[1])
for i = 2, #ARGV do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 or redis.call('HLEN', KEYS[1]) < limit then
    redis.call('HINCRBY', KEYS[1], ARGV[i], 1)
  end
end
return 0
