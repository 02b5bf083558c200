--[[
  Applies one host's session choice (politeness/session-choice.ts). The caller read the sessions
  hash and Redis TIME, decided with chooseSession, and sends the outcome here, so the decision lives
  in one place:
  - a reuse is applied while the session is alive and under maxUses, whatever else changed;
  - a create only if no session began or retired since the read ('#v' unchanged): two fetchers must
    not both begin the proxy's session, nor both make room;
  - the retirements (expired sessions, or room for a create) are idempotent: one already gone is
    skipped, and '#v' moves only when one was really removed.
  The slot's alive set follows in the same call (a session in when it begins, out when it retires),
  and sheds the sessions past their age, so the gauge read from it needs no second write.
  Times are the script's own TIME, so every fetcher writes on one clock.

  KEYS[1]   the host's sessions hash (one scope): <id> -> the session's fixed part (JSON: proxy,
            profile, headers), <id>:created, <id>:uses, <id>:last (ms), and '#v'
  KEYS[2]   the slot's alive set: '<scope> <host> <id>' -> when the session ends by age (ms)
  KEYS[3..] the cookie hashes of the sessions to retire, in the order of ARGV[9..]
  ARGV[1]   the '#v' the caller read
  ARGV[2]   'reuse' or 'create'
  ARGV[3]   the chosen session's id
  ARGV[4]   for 'create', its fixed part (JSON)
  ARGV[5]   maxUses
  ARGV[6]   how long the hash outlives its last change (ms): twice maxAgeMs, so a host left alone
            leaves nothing behind
  ARGV[7]   the alive set's member prefix: '<scope> <host> '
  ARGV[8]   maxAgeMs
  ARGV[9..] the ids to retire
  Returns {uses with this one, the script's time, the ids this call removed...} when applied (another
  fetcher may have retired the same expired session first: each retirement is counted once), {0, time}
  when the caller must read again.
]]
local sessions = KEYS[1]
local alive = KEYS[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id = ARGV[3]
local member = ARGV[7]
if ARGV[2] == 'create' then
  if tonumber(redis.call('HGET', sessions, '#v') or '0') ~= tonumber(ARGV[1]) then return {0, now} end
else
  if redis.call('HEXISTS', sessions, id) == 0 then return {0, now} end
  if tonumber(redis.call('HGET', sessions, id .. ':uses') or '0') >= tonumber(ARGV[5]) then return {0, now} end
end
local removed = {}
for i = 9, #ARGV do
  if redis.call('HDEL', sessions, ARGV[i], ARGV[i] .. ':created', ARGV[i] .. ':uses', ARGV[i] .. ':last') > 0 then
    removed[#removed + 1] = ARGV[i]
  end
  redis.call('DEL', KEYS[i - 6])
  redis.call('ZREM', alive, member .. ARGV[i])
end
if ARGV[2] == 'create' then
  redis.call('HSET', sessions, id, ARGV[4], id .. ':created', now, id .. ':uses', 0)
  redis.call('ZREMRANGEBYSCORE', alive, '-inf', '(' .. now)
  redis.call('ZADD', alive, now + tonumber(ARGV[8]), member .. id)
end
if ARGV[2] == 'create' or #removed > 0 then redis.call('HINCRBY', sessions, '#v', 1) end
local uses = redis.call('HINCRBY', sessions, id .. ':uses', 1)
redis.call('HSET', sessions, id .. ':last', now)
redis.call('PEXPIRE', sessions, ARGV[6])
return {uses, now, unpack(removed)}
