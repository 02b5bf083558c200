-- Marks a running crawl `done` when no job of it is pending in any stage and its frontier is empty.
-- metaKey: the crawl's meta hash; pendingKeys: its three pending sets; frontierKey: its frontier
-- list; now: ISO timestamp.
local function markDoneIfIdle(metaKey, pendingKeys, frontierKey, now)
  if redis.call('HGET', metaKey, 'state') ~= 'running' then return 0 end
  for _, key in ipairs(pendingKeys) do
    if redis.call('SCARD', key) > 0 then return 0 end
  end
  if redis.call('LLEN', frontierKey) > 0 then return 0 end
  redis.call('HSET', metaKey, 'state', 'done', 'finishedAt', now)
  return 1
end
