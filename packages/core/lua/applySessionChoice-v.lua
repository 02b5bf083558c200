--[[
  Applies one host's session choice (politeness/session-choice.ts) if the host's sessions are still
  as the caller read them. The caller read the sessions hash and Redis TIME, decided with
  chooseSession, and sends the outcome here: the decision lives in one place, and a fleet's fetchers
  race only when a session begins or retires, which bumps '#v'.

  KEYS[1]   the host's sessions hash: <id> -> the session's fixed part (JSON: proxy, profile,
            createdAt), <id>:uses, <id>:last (ms), and '#v'
  KEYS[2..] the cookie hashes of the sessions to retire, in the order of ARGV[8..]
  ARGV[1]   the '#v' the caller read
  ARGV[2]   'reuse' or 'create'
  ARGV[3]   the chosen session's id
  ARGV[4]   for 'create', its fixed part (JSON)
  ARGV[5]   now: the server's TIME as the caller read it (ms)
  ARGV[6]   maxUses: a reused session that reached it meanwhile is not taken
  ARGV[7]   how long the hash outlives its last change (ms): twice maxAgeMs, so a host left alone
            leaves nothing behind
  ARGV[8..] the ids to retire
  Returns the session's uses with this one when applied, 0 when the sessions changed since the read
  (the caller reads again).
]]
local sessions = KEYS[1]
local version = tonumber(redis.call('HGET', sessions, '#v') or '0')
if version ~= tonumber(ARGV[1]) then return 0 end
local id = ARGV[3]
if ARGV[2] == 'reuse' then
  if redis.call('HEXISTS', sessions, id) == 0 then return 0 end
  if tonumber(redis.call('HGET', sessions, id .. ':uses') or '0') >= tonumber(ARGV[6]) then return 0 end
else
  redis.call('HSET', sessions, id, ARGV[4], id .. ':uses', 0)
end
for i = 8, #ARGV do
  redis.call('HDEL', sessions, ARGV[i], ARGV[i] .. ':uses', ARGV[i] .. ':last')
  redis.call('DEL', KEYS[i - 6])
end
if ARGV[2] == 'create' or #ARGV >= 8 then redis.call('HINCRBY', sessions, '#v', 1) end
local uses = redis.call('HINCRBY', sessions, id .. ':uses', 1)
redis.call('HSET', sessions, id .. ':last', ARGV[5])
redis.call('PEXPIRE', sessions, ARGV[7])
return uses
