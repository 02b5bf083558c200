--[[
  A job is finished: its output is durably enqueued or written. Applies its counters exactly once
  and marks the crawl done when nothing of it is pending any more.

  KEYS[1] meta      KEYS[2] counters   KEYS[3] urls   KEYS[4] dead
  KEYS[5] active    the stage's active set
  KEYS[6..8]        the pending sets of fetch, parse and write
  KEYS[9] requests  fingerprint -> fetch request of a URL in flight: dropped once no stage holds the URL
  KEYS[10] rebuilds the reconciler's record of URLs it sent back to fetch ('r:' .. fingerprint -> the
                    state they had reached): a stage they had finished before does not count again
  KEYS[11] frontier the crawl's URLs admitted and not yet taken into the fetch stage
  ARGV[1] jobId
  ARGV[2] stage index into KEYS[6..8] (1 fetch, 2 parse, 3 write)
  ARGV[3] now, ISO 8601
  ARGV[4] URL fingerprint to update in urls, or ''
  ARGV[5] its new state, or ''; a stage's done marker (d, p, w) never moves a URL backwards
  ARGV[6] dead-letter record (JSON), or ''
  ARGV[7] window: when > 0, a finished fetch job makes room, and URLs are taken from the frontier
          into it (takeFrontier.lua)
  ARGV[8] the fewest free places worth a take
  ARGV[9] the next stage's job this job handed its URL over to (a fetch job's parse job, a parse
          job's write job), or ''. It must still be pending unless the URL has reached that stage's
          done marker: after a Redis failover that lost the last writes before it (replication is
          asynchronous), its pending mark may be gone while its BullMQ job lives in another slot, and
          this finish is what puts the mark back. A job that finds itself not pending does nothing,
          so without the mark the URL's items would be lost; with it, the job runs, or the reconciler
          rebuilds the URL when the job was already skipped.
  ARGV[10..] pairs: counter name, increment

  A job that was never pending (a poison job enqueued by hand) still lands in the dead-letter set,
  once: its counters apply only when its record is new.

  Returns {outcome, taken}: outcome 0 when the job had already finished (nothing applied), 1 when
  applied, 2 when applied and the crawl is now done; taken, the {job id, request JSON, ...} pairs
  taken from the frontier, for the caller to add to the fetch queue.
]]
--!include markDoneIfIdle.lua
--!include urlStates.lua
--!include urlIndex.lua
--!include takeFrontier.lua
local COUNTERS_FROM = 10
local pendingKeys = {KEYS[6], KEYS[7], KEYS[8]}
local stagePending = pendingKeys[tonumber(ARGV[2])]
if redis.call('SREM', stagePending, ARGV[1]) == 0 then
  if ARGV[6] == '' or redis.call('HSETNX', KEYS[4], ARGV[1], ARGV[6]) == 0 then return {0, {}} end
  for i = COUNTERS_FROM, #ARGV, 2 do
    redis.call('HINCRBY', KEYS[2], ARGV[i], tonumber(ARGV[i + 1]))
  end
  return {1, {}}
end
redis.call('SREM', KEYS[5], ARGV[1])
local fp = string.sub(ARGV[1], 2)
local letter = string.sub(ARGV[1], 1, 1)
local isUrlJob = letter == 'f' or letter == 'p' or letter == 'w'
local countIt = true
if isUrlJob then
  local before = redis.call('HGET', KEYS[10], 'r:' .. fp)
  if before and reached(before, ({'d', 'p', 'w'})[tonumber(ARGV[2])]) then countIt = false end
end
if ARGV[4] ~= '' then
  local index = openUrlIndex(KEYS[3])
  if not (STAGE_RANK[ARGV[5]] and reached(index.get(ARGV[4]), ARGV[5])) then
    index.set(ARGV[4], ARGV[5])
    index.flush()
  end
end
local handedTo = ARGV[9]
if handedTo ~= '' then
  local childStage = ({p = 2, w = 3})[string.sub(handedTo, 1, 1)]
  local childKey = pendingKeys[childStage]
  if childKey and redis.call('SISMEMBER', childKey, handedTo) == 0 and redis.call('HEXISTS', KEYS[4], handedTo) == 0 then
    local childFp = string.sub(handedTo, 2)
    local reachedDone = reached(openUrlIndex(KEYS[3]).get(childFp), ({'d', 'p', 'w'})[childStage])
    if not reachedDone or redis.call('HEXISTS', KEYS[10], 'r:' .. childFp) == 1 then
      redis.call('SADD', childKey, handedTo)
    end
  end
end
if isUrlJob and redis.call('SISMEMBER', KEYS[6], 'f' .. fp) == 0
    and redis.call('SISMEMBER', KEYS[7], 'p' .. fp) == 0 and redis.call('SISMEMBER', KEYS[8], 'w' .. fp) == 0 then
  redis.call('HDEL', KEYS[9], fp)
  redis.call('HDEL', KEYS[10], 'r:' .. fp)
end
if ARGV[6] ~= '' then redis.call('HSET', KEYS[4], ARGV[1], ARGV[6]) end
-- A stage the URL had finished before counts nothing again, except a new dead letter: a replay took
-- the old one out of 'failed', so the URL failing again is counted again.
for i = COUNTERS_FROM, #ARGV, 2 do
  if countIt or (ARGV[6] ~= '' and (ARGV[i] == 'failed' or string.sub(ARGV[i], 1, 5) == 'dead.')) then
    redis.call('HINCRBY', KEYS[2], ARGV[i], tonumber(ARGV[i + 1]))
  end
end
local taken = {}
if ARGV[2] == '1' then taken = takeFrontier(KEYS[1], KEYS[11], KEYS[6], KEYS[9], tonumber(ARGV[7]), tonumber(ARGV[8])) end
return {1 + markDoneIfIdle(KEYS[1], pendingKeys, KEYS[11], ARGV[3]), taken}
