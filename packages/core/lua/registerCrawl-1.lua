--[[
  Registers a crawl, or resumes it when its id exists.

  KEYS[1] meta
  ARGV[1] spider JSON   ARGV[2] spider version   ARGV[3] sink JSON   ARGV[4] now   ARGV[5] spider name
  ARGV[6] spider module reference JSON ({path, hash}), or '' for a spider without code
  ARGV[7] partitions for a new crawl: a crawl keeps the count it was registered with for its life

  A new crawl starts `running`. An existing one keeps its frontier, counters and partitions; it takes
  the new spider and sink, and returns to `running` unless it is paused. A crawl registered before
  partitions (no `parts`) is not touched.
  Returns {created (1 or 0, or -1 for a crawl of an older layout), parts, state, version, startedAt}.
]]
local meta = KEYS[1]
if redis.call('EXISTS', meta) == 0 then
  redis.call('HSET', meta, 'spider', ARGV[1], 'version', ARGV[2], 'sink', ARGV[3], 'state', 'running',
    'startedAt', ARGV[4], 'spiderName', ARGV[5], 'parts', ARGV[7], 'gen', 1)
  if ARGV[6] ~= '' then redis.call('HSET', meta, 'module', ARGV[6]) end
  return {1, tonumber(ARGV[7]), 'running', ARGV[2], ARGV[4]}
end
local parts = tonumber(redis.call('HGET', meta, 'parts'))
if not parts then return {-1, 0, redis.call('HGET', meta, 'state') or '', '', ''} end
redis.call('HSET', meta, 'spider', ARGV[1], 'version', ARGV[2], 'sink', ARGV[3], 'spiderName', ARGV[5])
if ARGV[6] ~= '' then redis.call('HSET', meta, 'module', ARGV[6]) else redis.call('HDEL', meta, 'module') end
if redis.call('HGET', meta, 'state') ~= 'paused' then
  redis.call('HSET', meta, 'state', 'running')
  redis.call('HDEL', meta, 'finishedAt')
end
redis.call('HINCRBY', meta, 'gen', 1)
local m = redis.call('HMGET', meta, 'state', 'startedAt')
return {0, parts, m[1], ARGV[2], m[2]}
