--[[
  Keeps what one response set in its session's cookies, if the session is still alive: a response
  that comes back after its session retired (another fetcher's block) stores nothing, so a retired
  session's cookies do not come back.
  - A response from an origin that is not secure (http:) changes no cookie stored as Secure
    (RFC 6265bis, "leave secure cookies alone").
  - A session holds at most maxCookies cookies; past it, new names are refused and known ones
    still update.

  KEYS[1]  the host's sessions hash (see applySessionChoice-v.lua)
  KEYS[2]  the session's cookie hash: `domain;path;name` -> the cookie (tough-cookie's JSON)
  ARGV[1]  the session's id
  ARGV[2]  how long the cookie hash outlives its last change (ms)
  ARGV[3]  '1' if the response came from a secure origin, else '0'
  ARGV[4]  maxCookies
  ARGV[5..] triples: field, 'set' or 'del', the cookie's JSON ('' for del)
  Returns how many cookies changed, or -1 when the session is gone.
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
local secureOrigin = ARGV[3] == '1'
local maxCookies = tonumber(ARGV[4])
local changed = 0
for i = 5, #ARGV, 3 do
  local field, op, value = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local old = redis.call('HGET', KEYS[2], field)
  local guarded = old and not secureOrigin and string.find(old, '"secure":true', 1, true)
  if not guarded then
    if op == 'del' then
      changed = changed + redis.call('HDEL', KEYS[2], field)
    elseif old or redis.call('HLEN', KEYS[2]) < maxCookies then
      redis.call('HSET', KEYS[2], field, value)
      changed = changed + 1
    end
  end
end
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return changed
