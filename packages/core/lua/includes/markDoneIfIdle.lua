-- Marks a running crawl `done` when no job of it is pending in any stage.
-- metaKey: the crawl's meta hash; pendingKeys: its three pending sets; now: ISO timestamp.
local function markDoneIfIdle(metaKey, pendingKeys, now)
  if redis.call('HGET', metaKey, 'state') ~= 'running' then return 0 end
  for _, key in ipairs(pendingKeys) do
    if redis.call('SCARD', key) > 0 then return 0 end
  end
  redis.call('HSET', metaKey, 'state', 'done', 'finishedAt', now)
  return 1
end
