-- Is this partition of the crawl idle: no job of it pending in any stage and no URL waiting in its
-- host queues? A crawl is done when all its partitions are idle at one moment (checked from outside
-- the partitions: packages/crawl/src/completion.ts).
local function partitionIdle(partKey, pendingKeys)
  for _, key in ipairs(pendingKeys) do
    if redis.call('SCARD', key) > 0 then return 0 end
  end
  if (tonumber(redis.call('HGET', partKey, 'q')) or 0) > 0 then return 0 end
  return 1
end
