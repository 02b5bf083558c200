--[[
  Registers a crawl, or resumes it when its id exists.

  KEYS[1] meta   KEYS[2] seeding: injection id -> when its lease lapses (beginInjection-2.lua)
  ARGV[1] spider JSON   ARGV[2] spider version   ARGV[3] sink JSON   ARGV[4] now   ARGV[5] spider name
  ARGV[6] spider module reference JSON ({path, hash}), or '' for a spider without code
  ARGV[7] partitions for a new crawl: a crawl keeps the count it was registered with for its life
  ARGV[8] the id of the seeding run's injection, opened here, or '' for none
  ARGV[9] the injection's lease (ms, on Redis's clock)

  A seeding run's injection opens in the step that registers the crawl (running again): opened
  after it, a done check in between (a worker's finish, the reconciler's round) could mark the crawl
  done, and the seeds would then be fetched after `done`.

  A new crawl starts `running`. An existing one keeps its frontier, counters and partitions; it takes
  the new spider and sink, and returns to `running` unless it is paused. A crawl registered before
  partitions (no `parts`) is not touched.
  Returns {created (1 or 0, or -1 for a crawl of an older layout), parts, state, version, startedAt,
  gen}: the caller stamps its copies of the state in the partitions with gen (markPartDone-1.lua).
]]
local meta = KEYS[1]
local function openInjection()
  if ARGV[8] == '' then return end
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[2], ARGV[8], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[9]))
end
if redis.call('EXISTS', meta) == 0 then
  redis.call('HSET', meta, 'spider', ARGV[1], 'version', ARGV[2], 'sink', ARGV[3], 'state', 'running',
    'startedAt', ARGV[4], 'spiderName', ARGV[5], 'parts', ARGV[7], 'gen', 1)
  if ARGV[6] ~= '' then redis.call('HSET', meta, 'module', ARGV[6]) end
  openInjection()
  return {1, tonumber(ARGV[7]), 'running', ARGV[2], ARGV[4], 1}
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
openInjection()
local m = redis.call('HMGET', meta, 'state', 'startedAt', 'gen')
return {0, parts, m[1], ARGV[2], m[2], tonumber(m[3])}
