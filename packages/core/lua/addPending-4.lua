--[[
  Marks jobs pending before they are enqueued, except those already done or dead-lettered:
  - done: the URL's state in the frontier has reached this stage's done marker ('p' parsed, 'w'
    written). A fetch job that re-runs after its worker died, having already handed over its page,
    would otherwise enqueue the parse job a second time, and the page would count twice.
  - dead-lettered: the job stays in BullMQ's failed set (for Bull Board) under its id, so adding it
    again would be a silent no-op that leaves a pending id with no job behind it.

  KEYS[1] pending   the stage's pending set
  KEYS[2] dead      the crawl's dead-letter hash (job id -> record)
  KEYS[3] urls      the crawl's seen-URL index (fingerprint -> state, urlIndex.lua)
  KEYS[4] rebuilds  URLs the reconciler sent back to fetch ('r:' .. fingerprint): their stages run again
  ARGV[1]           this stage's done state ('p', 'w'), or '' for none
  ARGV[2..]         job ids (a stage letter and the URL's fingerprint)

  Returns the job ids now pending, to enqueue.
]]
--!include urlStates.lua
--!include urlIndex.lua
local doneState = ARGV[1]
local index = openUrlIndex(KEYS[3])
local out = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local skip = redis.call('HEXISTS', KEYS[2], id) == 1
  if not skip and doneState ~= '' then
    local fp = string.sub(id, 2)
    skip = reached(index.get(fp), doneState) and redis.call('HEXISTS', KEYS[4], 'r:' .. fp) == 0
  end
  if not skip then
    redis.call('SADD', KEYS[1], id)
    out[#out + 1] = id
  end
end
return out
