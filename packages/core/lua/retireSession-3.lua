--[[
  Retires one session of a host now (a block): it and its cookies are gone for every fetcher, and it
  leaves the slot's alive set. '#v' moves, and the hash's expiry is renewed, only when the session
  was alive, so a retire that comes after the hash expired (a request held longer than twice
  maxAgeMs) leaves nothing behind.

  KEYS[1]  the host's sessions hash (see applySessionChoice-v.lua)
  KEYS[2]  the session's cookie hash
  KEYS[3]  the slot's alive set
  ARGV[1]  the session's id
  ARGV[2]  how long the hash outlives its last change (ms)
  ARGV[3]  the session's member of the alive set ('<scope> <host> <id>')
  Returns 1 if the session was alive, else 0.
]]
local id = ARGV[1]
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[3])
local removed = redis.call('HDEL', KEYS[1], id, id .. ':created', id .. ':uses', id .. ':last')
if removed == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], '#v', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
