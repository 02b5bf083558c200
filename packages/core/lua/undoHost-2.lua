--[[
  Gives back a host acquireHost-2.lua granted, when the request cannot go after all (no proxy may
  send it yet): the lease is dropped, and the host's last start goes back to what it was, unless
  another request started on the host since (then its start stands).

  KEYS[1] host hash   KEYS[2] host leases
  ARGV[1] lease id    ARGV[2] the host's last start before the grant ('' for none)
  ARGV[3] the grant's time (acquireHost-2.lua's `now`)
]]
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('HGET', KEYS[1], 'last') == ARGV[3] then
  if ARGV[2] == '' then redis.call('HDEL', KEYS[1], 'last') else redis.call('HSET', KEYS[1], 'last', ARGV[2]) end
end
return 1
