--[[
  Marks jobs pending before they are enqueued, except those already dead-lettered: a dead-lettered
  job stays in BullMQ's failed set (for Bull Board) under its id, so adding it again would be a
  silent no-op that leaves a pending id with no job behind it, and the crawl would never end.

  KEYS[1] pending   the stage's pending set
  KEYS[2] dead      the crawl's dead-letter hash (job id -> record)
  ARGV[1..]         job ids

  Returns the job ids now pending, to enqueue.
]]
local out = {}
for i = 1, #ARGV do
  if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then
    redis.call('SADD', KEYS[1], ARGV[i])
    out[#out + 1] = ARGV[i]
  end
end
return out
