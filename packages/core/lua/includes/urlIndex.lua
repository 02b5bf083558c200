-- The crawl's seen-URL index: URL fingerprint -> one state letter (see urlStates.lua and
-- admitUrls-6.lua), packed so that a seen URL costs about 10 bytes of Redis at 10^6 URLs, where a
-- hash field per URL costs 90.
--
-- The index is one hash of up to 65,536 fields (URL_BUCKETS in keys.ts). The fingerprint picks a field by
-- its first 4 digits, and the next 7 bytes of it are the record's tag: a field's value is a string of
-- 8-byte records, tag then state letter. 72 bits of fingerprint tell URLs apart (two URLs of a crawl
-- of 10^6 share a record with odds of about 1 in 10^10). A script reads the fields it needs in one
-- HMGET, changes them in Lua, and writes them back in one HSET, which sizes each value exactly.
-- A lookup reads its whole field: 8 bytes times URLs / 65,536 (120 bytes at 10^6 URLs, 1.2 KB at 10^7).
local URL_RECORD = 8

local sub, char = string.sub, string.char
local function byteAt(fp, i)
  return tonumber(sub(fp, i, i + 1), 16)
end

-- The field and the 7-byte tag of a fingerprint (hex digits 1-4 and 5-18).
local function urlBucketAndTag(fp)
  return tostring(tonumber(sub(fp, 1, 4), 16)),
    char(byteAt(fp, 5), byteAt(fp, 7), byteAt(fp, 9), byteAt(fp, 11), byteAt(fp, 13), byteAt(fp, 15), byteAt(fp, 17))
end

-- The position of `tag`'s record in a bucket, or nil; a match across two records is skipped.
local function findUrlRecord(bucket, tag)
  local from = 1
  while true do
    local at = string.find(bucket, tag, from, true)
    if not at then return nil end
    if (at - 1) % URL_RECORD == 0 then return at end
    from = at + 1
  end
end

-- The index for the length of one script: load(fps) reads the buckets of many fingerprints at
-- once; get and set by fingerprint; flush() writes the buckets that changed.
local function openUrlIndex(key)
  local buckets, changed, located = {}, {}, {}
  local function locate(fp)
    local place = located[fp]
    if not place then
      place = {urlBucketAndTag(fp)}
      located[fp] = place
    end
    return place[1], place[2]
  end
  local function bucketOf(fp)
    local field, tag = locate(fp)
    if buckets[field] == nil then buckets[field] = redis.call('HGET', key, field) or '' end
    return field, tag
  end
  local index = {}
  function index.load(fps)
    local wanted, seen = {}, {}
    for _, fp in ipairs(fps) do
      local field = locate(fp)
      if buckets[field] == nil and not seen[field] then
        seen[field] = true
        wanted[#wanted + 1] = field
      end
    end
    for i = 1, #wanted, 1000 do
      local values = redis.call('HMGET', key, unpack(wanted, i, math.min(i + 999, #wanted)))
      for j, v in ipairs(values) do buckets[wanted[i + j - 1]] = v or '' end
    end
  end
  function index.get(fp)
    local field, tag = bucketOf(fp)
    local at = findUrlRecord(buckets[field], tag)
    if at then return sub(buckets[field], at + 7, at + 7) end
    return false
  end
  function index.set(fp, state)
    local field, tag = bucketOf(fp)
    local bucket = buckets[field]
    local at = findUrlRecord(bucket, tag)
    if at then
      buckets[field] = sub(bucket, 1, at + 6) .. state .. sub(bucket, at + 8)
    else
      buckets[field] = bucket .. tag .. state
    end
    changed[field] = true
  end
  function index.flush()
    local pairs_ = {}
    for field in pairs(changed) do
      pairs_[#pairs_ + 1] = field
      pairs_[#pairs_ + 1] = buckets[field]
    end
    for i = 1, #pairs_, 2000 do redis.call('HSET', key, unpack(pairs_, i, math.min(i + 1999, #pairs_))) end
    changed = {}
  end
  return index
end
