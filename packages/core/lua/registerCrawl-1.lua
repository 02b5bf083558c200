--[[
  Registers a crawl, or resumes it when its id exists.

  KEYS[1] meta
  ARGV[1] spider JSON   ARGV[2] spider version   ARGV[3] sink JSON   ARGV[4] now   ARGV[5] spider name
  ARGV[6] spider module reference JSON ({path, hash}), or '' for a spider without code

  A new crawl starts `running`. An existing one keeps its frontier and counters; it takes the new
  spider and sink, and returns to `running` unless it is paused.
  Returns 1 for a new crawl, 0 for a resumed one.
]]
local meta = KEYS[1]
if redis.call('EXISTS', meta) == 0 then
  redis.call('HSET', meta, 'spider', ARGV[1], 'version', ARGV[2], 'sink', ARGV[3], 'state', 'running',
    'startedAt', ARGV[4], 'spiderName', ARGV[5])
  if ARGV[6] ~= '' then redis.call('HSET', meta, 'module', ARGV[6]) end
  return 1
end
redis.call('HSET', meta, 'spider', ARGV[1], 'version', ARGV[2], 'sink', ARGV[3], 'spiderName', ARGV[5])
if ARGV[6] ~= '' then redis.call('HSET', meta, 'module', ARGV[6]) else redis.call('HDEL', meta, 'module') end
if redis.call('HGET', meta, 'state') ~= 'paused' then
  redis.call('HSET', meta, 'state', 'running')
  redis.call('HDEL', meta, 'finishedAt')
end
return 0
