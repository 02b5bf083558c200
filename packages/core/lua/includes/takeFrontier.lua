-- The lean frontier: an admitted URL waits as a fingerprint in the crawl's frontier list (its
-- request is in `requests`), not as a BullMQ job. Only a bounded window of each crawl's URLs are
-- fetch jobs at a time: this moves URLs from the head of the list into the fetch stage's pending set
-- while the crawl runs and the window has at least `minBatch` places free, and returns them,
-- {job id, request JSON} pairs, for the caller to add to the fetch queue. A caller that dies before
-- adding them leaves pending ids with no job, which the reconciler rebuilds from `requests`.
local function takeFrontier(metaKey, frontierKey, pendingFetch, requestsKey, window, minBatch)
  if window <= 0 or redis.call('HGET', metaKey, 'state') ~= 'running' then return {} end
  local room = window - redis.call('SCARD', pendingFetch)
  if room < math.max(1, minBatch) then return {} end
  local fps = redis.call('LPOP', frontierKey, math.min(room, 4000))
  if not fps then return {} end
  local bodies = redis.call('HMGET', requestsKey, unpack(fps))
  local out, ids = {}, {}
  for i, fp in ipairs(fps) do
    -- A URL without its request was finished some other way (a replay, a reset); it is not fetched.
    if bodies[i] then
      local id = 'f' .. fp
      ids[#ids + 1] = id
      out[#out + 1] = id
      out[#out + 1] = bodies[i]
    end
  end
  if #ids > 0 then redis.call('SADD', pendingFetch, unpack(ids)) end
  return out
end
