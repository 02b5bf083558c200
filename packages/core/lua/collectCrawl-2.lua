--[[
  Turns a finished crawl's meta into its summary: the first step of its collection by gc
  (packages/crawl/src/gc.ts). Its other keys are unlinked afterwards, from outside the script (they
  are in its partitions' slots).

  KEYS[1] meta   KEYS[2] seeding
  ARGV[1] the cutoff: the latest finishedAt collected (ISO 8601, UTC; compared as text)
  ARGV[2] the crawl's gen when its summary was read   ARGV[3] now (ISO 8601)
  ARGV[4..] the summary's fields and values, in pairs (packages/crawl/src/summary.ts)

  Collected only: a crawl done, failed or cancelled, finished at or before the cutoff (startedAt when
  it has no finishedAt), with no seeding run or replay open and gen unchanged (no seed or replay
  since the summary was read). The meta then holds state, spiderName, startedAt, finishedAt,
  collectedAt, the summary's fields and gcParts (its partition count, '0' for a crawl of the layout
  before partitions) until gc has unlinked the rest. It has no `parts` any more, so registerCrawl-1
  refuses to register the crawl id again (as it refuses a crawl of an older layout) rather than
  start it over the partitions being unlinked.
  Returns the partition count, or -1 when the crawl is not (or no longer) to be collected.
]]
local m = redis.call('HMGET', KEYS[1], 'state', 'finishedAt', 'startedAt', 'gen', 'parts', 'spiderName', 'collectedAt')
local state, finishedAt, startedAt = m[1], m[2], m[3]
if m[7] or (state ~= 'done' and state ~= 'failed' and state ~= 'cancelled') then return -1 end
local finished = finishedAt or startedAt or ''
if finished == '' or finished > ARGV[1] then return -1 end
if (m[4] or '0') ~= ARGV[2] or redis.call('HLEN', KEYS[2]) > 0 then return -1 end
local parts = m[5] or '0'
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', state, 'spiderName', m[6] or '', 'startedAt', startedAt or '', 'finishedAt', finishedAt or '',
  'collectedAt', ARGV[3], 'gcParts', parts)
if #ARGV >= 5 then redis.call('HSET', KEYS[1], unpack(ARGV, 4, #ARGV)) end
return tonumber(parts)
