-- The time between two request starts on a host whose delay is `delay` ms: a little over the delay
-- (15%, at most 40 ms). The site sees a request a moment after its grant, and that moment varies
-- with the fetcher's load, so grants spaced by exactly the delay could arrive closer. The limiter
-- (acquireHost-2.lua) spaces grants by it, and the frontier (hosts.lua) hands out a host's URLs by
-- it, so that a URL handed out on time is granted at once.
local function hostSpacing(delay)
  if delay <= 0 then return 0 end
  return delay + math.min(40, delay * 0.15)
end
