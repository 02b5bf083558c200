--[[
  The reconciler found a pending job with no live BullMQ job behind it (removed by hand, lost with
  the last second of an AOF, finished without its finish being recorded). Its URL goes back to the
  fetch stage: a lost fetch job is rebuilt from the URL's request, and a lost parse or write job,
  whose page or items are gone with it, is redone from a new fetch. Stages the URL had finished
  run again without counting again (finishJob-12.lua reads the 'r:' record).

  KEYS[1] pending   the lost job's stage's pending set
  KEYS[2] pending   the fetch stage's pending set
  KEYS[3] rebuilds  fingerprint -> rebuilds so far; 'r:' .. fingerprint -> the URL's state before
  KEYS[4] suspects  job id -> when first found lost
  KEYS[5] part      the partition hash (the index's level)
  KEYS[6] active    KEYS[7] delayed   the lost job's stage's sets, which may still name it
  KEYS[8] hosts     KEYS[9] ready     the URL's host takes one more fetch (hosts.lua)
  ARGV[1] the lost job's id   ARGV[2] the most rebuilds of one URL
  ARGV[3] the prefix of the index's bucket keys   ARGV[4] the URL's host
  ARGV[5] the prefix of the host queue keys

  Returns 1 when the caller must (re)add the fetch job, 0 when the job is no longer pending (it
  finished meanwhile) or no longer suspect (another round rewound it already), -1 when the URL was rebuilt too often already (the caller dead-letters it).
]]
--!include urlIndex.lua
--!include hosts.lua
local id = ARGV[1]
if redis.call('SISMEMBER', KEYS[1], id) == 0 then
  redis.call('HDEL', KEYS[4], id)
  return 0
end
-- Only a round that found it lost acts, once: the fleet's lock gives one round per interval, not one
-- round at a time, and a second round at once, which read it lost too, finds its suspect entry gone.
if redis.call('HDEL', KEYS[4], id) == 0 then return 0 end
local fp = string.sub(id, 2)
redis.call('SREM', KEYS[6], id)
redis.call('SREM', KEYS[7], id)
if redis.call('HINCRBY', KEYS[3], fp, 1) > tonumber(ARGV[2]) then return -1 end
if KEYS[1] ~= KEYS[2] then
  redis.call('HSETNX', KEYS[3], 'r:' .. fp, openUrlIndex(KEYS[5], ARGV[3]).get(fp) or 'q')
  redis.call('SREM', KEYS[1], id)
  if redis.call('SADD', KEYS[2], 'f' .. fp) == 1 then
    -- one more of the host's URLs is in the fetch stage
    local st = readHost(KEYS[8], ARGV[4])
    if st then
      st.i = st.i + 1
      writeHost(KEYS[8], ARGV[4], st)
      scheduleHost(KEYS[9], ARGV[4], st, redis.call('LLEN', ARGV[5] .. ARGV[4]))
    end
  end
end
return 1
