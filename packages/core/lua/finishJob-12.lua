--[[
  A job is finished: its output is durably enqueued or written. Applies its effects exactly once, in
  its URL's partition: counters, the URL's state, a dead letter, the hand-over to the next stage, and
  for a fetch job, its host's turn and what the fetch learnt of the host; then it feeds the fetch
  stage from the ready hosts (takeReady.lua).

  KEYS[1] part      KEYS[2] counters   KEYS[3] dead   KEYS[4] active: the stage's active set
  KEYS[5..7]        the pending sets of fetch, parse and write
  KEYS[8] requests  fingerprint -> fetch request of a URL in flight: dropped once no stage holds the URL
  KEYS[9] rebuilds  the reconciler's record of URLs it sent back to fetch ('r:' .. fingerprint -> the
                    state they had reached): a stage they had finished before does not count again
  KEYS[10] hosts    KEYS[11] ready   KEYS[12] backlog   (hosts.lua)
  ARGV[1] jobId
  ARGV[2] stage index into KEYS[5..7] (1 fetch, 2 parse, 3 write)
  ARGV[3] now, ISO 8601
  ARGV[4] URL fingerprint to update in the index, or ''
  ARGV[5] its new state, or ''; a stage's done marker (d, p, w) never moves a URL backwards
  ARGV[6] dead-letter record (JSON), or ''
  ARGV[7] window   ARGV[8] the fewest free places worth a take   ARGV[9] horizon (ms)
  ARGV[10] the next stage's job this job hands its URL over to (a fetch job's parse job, a parse
           job's write job), or ''. It becomes pending here, in the same step that ends this job,
           and is added to its queue after this finish, so it never starts before it is pending;
           unless it was dead-lettered before, or the URL has reached that stage's done marker
           already (a fetch job that ran again after its worker died, having handed its page over).
  ARGV[11] the prefix of the index's bucket keys   ARGV[12] the prefix of the host queue keys
  ARGV[13] the URL's host, for a fetch job (its turn goes back), or ''
  ARGV[14..17] what the fetch learnt of the host, each '' when unknown: its concurrency, its delay
           (ms), when this request started (ms, the limiter's clock), a Retry-After hold until (ms)
  ARGV[18] the crawl id (a taken URL's job is named by its fingerprint)
  ARGV[19] the run of the crawl the job belongs to (its startedAt when the job began), or '' for
           any: a job of an older run (the crawl was reset, and maybe registered again, while the
           job ran) changes nothing, and ends as one that had finished already
  ARGV[20] the WARC target URI whose exchange the job archived (its final URL), or '': `archived`
           counts once per such URI and run
  ARGV[21..] pairs: counter name, increment

  A job that was never pending (a poison job enqueued by hand) still lands in the dead-letter set,
  once: its counters apply only when its record is new.

  Returns {outcome, taken, idle}: outcome 0 when the job had already finished (nothing applied), 1
  when applied; taken, the {job id, request, wait ms, ...} triples taken into the fetch stage;
  idle 1 when the partition has nothing pending and nothing waiting now (the caller checks whether
  the whole crawl is done).
]]
--!include urlStates.lua
--!include urlIndex.lua
--!include hosts.lua
--!include takeReady.lua
--!include partitionIdle.lua
local COUNTERS_FROM = 21
local partKey, counters, dead, rebuilds = KEYS[1], KEYS[2], KEYS[3], KEYS[9]
local pendingKeys = {KEYS[5], KEYS[6], KEYS[7]}
local stageIndex = tonumber(ARGV[2])
local id = ARGV[1]
if ARGV[19] ~= '' and redis.call('HGET', partKey, 'startedAt') ~= ARGV[19] then return {0, {}, 0} end
if redis.call('SREM', pendingKeys[stageIndex], id) == 0 then
  if ARGV[6] == '' or redis.call('HSETNX', dead, id, ARGV[6]) == 0 then return {0, {}, 0} end
  for i = COUNTERS_FROM, #ARGV, 2 do
    redis.call('HINCRBY', counters, ARGV[i], tonumber(ARGV[i + 1]))
  end
  return {1, {}, 0}
end
redis.call('SREM', KEYS[4], id)
local fp = string.sub(id, 2)
local letter = string.sub(id, 1, 1)
local isUrlJob = letter == 'f' or letter == 'p' or letter == 'w'
local countIt = true
-- A fetch job that parsed its page (PARSE_IN_FETCHER, marked 'p') carries the parse stage's counters
-- too: they count unless the URL had been parsed before its rebuild, and its fetch's own unless it
-- had been fetched (a page fetched by a fetcher that handed it over, whose parse job was lost).
local parsedHere = stageIndex == 1 and ARGV[5] == 'p'
local FETCH_COUNTERS = {fetched = true, rendered = true, renderSkipped = true}
local countParse = true
if isUrlJob then
  local before = redis.call('HGET', rebuilds, 'r:' .. fp)
  if before and reached(before, ({'d', 'p', 'w'})[stageIndex]) then countIt = false end
  if before and reached(before, 'p') then countParse = false end
end
local function counts(name)
  if parsedHere and not FETCH_COUNTERS[name] then return countParse end
  return countIt
end
local index
local function urls()
  index = index or openUrlIndex(partKey, ARGV[11])
  return index
end
-- The URL's state after this finish (known here, so the hand-over need not read it again).
local urlState
if ARGV[4] ~= '' then
  urlState = urls().get(ARGV[4])
  if not (STAGE_RANK[ARGV[5]] and reached(urlState, ARGV[5])) then
    urls().set(ARGV[4], ARGV[5])
    urlState = ARGV[5]
  end
end
local handedTo = ARGV[10]
local handedOver = false
if handedTo ~= '' then
  local childStage = ({p = 2, w = 3})[string.sub(handedTo, 1, 1)]
  local childKey = pendingKeys[childStage]
  if childKey and redis.call('SISMEMBER', childKey, handedTo) == 0 and redis.call('HEXISTS', dead, handedTo) == 0 then
    local childFp = string.sub(handedTo, 2)
    local childState = childFp == ARGV[4] and urlState or urls().get(childFp)
    if not reached(childState, ({'d', 'p', 'w'})[childStage]) or redis.call('HEXISTS', rebuilds, 'r:' .. childFp) == 1 then
      handedOver = redis.call('SADD', childKey, handedTo) == 1
    end
  end
end
-- `archived` counts a URI once per run of the crawl, as the WARC sink archives it once (one capture
-- per target URI and run): a replayed dead letter's write, or a page whose redirect lands on a URL
-- archived already, archives nothing new. The mark is a record in the URL index under a fingerprint
-- of its own, so it goes with the run's partition; a write run again after its writer died between
-- the append and the finish still counts, once.
local archivedCounts = false
if ARGV[20] ~= '' then
  local mark = redis.sha1hex('archived\n' .. ARGV[20])
  if not urls().get(mark) then
    urls().set(mark, 'w')
    archivedCounts = true
  end
end
if index then index.flush() end
-- A URL handed over is still in flight; otherwise its request goes once no stage holds it.
if isUrlJob and not handedOver and redis.call('SISMEMBER', KEYS[5], 'f' .. fp) == 0
    and redis.call('SISMEMBER', KEYS[6], 'p' .. fp) == 0 and redis.call('SISMEMBER', KEYS[7], 'w' .. fp) == 0 then
  redis.call('HDEL', KEYS[8], fp)
  redis.call('HDEL', rebuilds, 'r:' .. fp)
end
if ARGV[6] ~= '' then redis.call('HSET', dead, id, ARGV[6]) end
-- A stage the URL had finished before counts nothing again, except a new dead letter: a replay took
-- the old one out of 'failed', so the URL failing again is counted again.
for i = COUNTERS_FROM, #ARGV, 2 do
  if ARGV[i] == 'archived' and ARGV[20] ~= '' then
    if archivedCounts then redis.call('HINCRBY', counters, ARGV[i], tonumber(ARGV[i + 1])) end
  elseif counts(ARGV[i]) or (ARGV[6] ~= '' and (ARGV[i] == 'failed' or string.sub(ARGV[i], 1, 5) == 'dead.')) then
    redis.call('HINCRBY', counters, ARGV[i], tonumber(ARGV[i + 1]))
  end
end
local taken = {}
if stageIndex == 1 then
  local host = ARGV[13]
  local st = host ~= '' and readHost(KEYS[10], host) or nil
  if st then
    st.i = math.max(0, st.i - 1)
    if ARGV[14] ~= '' then st.c = math.max(1, tonumber(ARGV[14])) end
    if ARGV[15] ~= '' then st.g = tonumber(ARGV[15]) end
    if ARGV[16] ~= '' then st.n = math.max(st.n, tonumber(ARGV[16]) + hostSpacing(st.g)) end
    if ARGV[17] ~= '' then st.h = math.max(st.h, tonumber(ARGV[17])) end
    writeHost(KEYS[10], host, st)
    scheduleHost(KEYS[11], host, st, redis.call('LLEN', ARGV[12] .. host))
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local K = {part = partKey, pendingFetch = KEYS[5], requests = KEYS[8], hosts = KEYS[10], ready = KEYS[11], backlog = KEYS[12], queuePrefix = ARGV[12], crawlId = ARGV[18]}
  taken = takeReady(K, now, tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]))
end
return {1, taken, partitionIdle(partKey, pendingKeys)}
