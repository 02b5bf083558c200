-- A partition's seen-URL index: URL fingerprint -> one state letter (urlStates.lua, admitUrls.lua).
--
-- Linear hashing over small hashes. The index is a growing number of bucket keys, `<prefix><n>`,
-- each a hash of 8-byte fingerprint prefix -> state (a small integer). A bucket holds about
-- URL_BUCKET_LOAD records: Redis keeps a hash that small as a listpack (hash-max-listpack-entries,
-- 128 by default), about 12 bytes a record, and its keys add about 3 more. A URL's state is read
-- with one HGET and written with one HSET of that field alone, so the cost of a lookup, and the
-- bytes a write adds to the AOF and the replication stream, stay the same at 10^4 URLs and at
-- 10^8: no bucket grows with the crawl, and none is ever rewritten whole.
--
-- Addressing: h = the fingerprint's first 32 bits; with L the level and s the split pointer, the
-- bucket is h mod 2^L, or h mod 2^(L+1) when that is below s. When the records outnumber
-- URL_BUCKET_LOAD per bucket, bucket s splits: its records whose bit L is set move to bucket
-- s + 2^L, and s moves on (to 0, with L + 1, when it reaches 2^L). The level, split pointer and
-- record count live in the partition hash (fields iL, is, in). A bucket not yet split in the
-- current round holds about twice the load at most, well within a listpack.
--
-- 64 bits of fingerprint tell URLs apart: a partition of 10^7 URLs confuses two with odds of about 1
-- in 4 * 10^5 (n^2 / 2^65).
local URL_BUCKET_LOAD = 45
local STATE_CODE = {q = 1, d = 2, p = 3, w = 4, S = 5, D = 6, L = 7, R = 8, H = 9}
local STATE_LETTER = {'q', 'd', 'p', 'w', 'S', 'D', 'L', 'R', 'H'}

-- The fingerprint's first 16 hex digits as 8 bytes. A script that makes many (an admission of
-- 1,000 URLs) builds a table of the 256 digit pairs once and converts with one gsub each, whose C
-- loop costs far less than 8 calls of tonumber and sub; building the table costs as much as about
-- 30 conversions, so a script that makes a few (a job's finish) converts directly.
local hexPair
local fieldsMade = 0
local function urlField(fp)
  fieldsMade = fieldsMade + 1
  if not hexPair and fieldsMade > 32 then
    hexPair = {}
    for b = 0, 255 do
      hexPair[string.format('%02x', b)] = string.char(b)
      hexPair[string.format('%02X', b)] = string.char(b)
    end
  end
  if hexPair then return (string.gsub(string.sub(fp, 1, 16), '..', hexPair)) end
  local sub = string.sub
  return string.char(tonumber(sub(fp, 1, 2), 16), tonumber(sub(fp, 3, 4), 16), tonumber(sub(fp, 5, 6), 16), tonumber(sub(fp, 7, 8), 16),
    tonumber(sub(fp, 9, 10), 16), tonumber(sub(fp, 11, 12), 16), tonumber(sub(fp, 13, 14), 16), tonumber(sub(fp, 15, 16), 16))
end

-- The first 32 bits of a field, as a number.
local function fieldHash(field)
  local a, b, c, d = string.byte(field, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

-- The index for the length of one script: get and set by fingerprint; flush() records the level,
-- split pointer and record count in partKey. A bucket splits as soon as the records outnumber the
-- load, before the next record goes in, so no bucket outgrows a listpack (Redis never turns a hash
-- back into one once it has outgrown it).
local function openUrlIndex(partKey, prefix)
  local m = redis.call('HMGET', partKey, 'iL', 'is', 'in')
  local level, split, count = tonumber(m[1]) or 0, tonumber(m[2]) or 0, tonumber(m[3]) or 0
  local changed = false
  local function bucketName(b)
    return prefix .. b
  end
  local function bucketOf(h)
    local b = h % (2 ^ level)
    if b < split then b = h % (2 ^ (level + 1)) end
    return bucketName(b)
  end
  local function splitOne()
    local from, to = bucketName(split), bucketName(split + 2 ^ level)
    local all = redis.call('HGETALL', from)
    local moved, gone = {}, {}
    for i = 1, #all, 2 do
      if math.floor(fieldHash(all[i]) / 2 ^ level) % 2 == 1 then
        moved[#moved + 1] = all[i]
        moved[#moved + 1] = all[i + 1]
        gone[#gone + 1] = all[i]
      end
    end
    if #gone > 0 then
      redis.call('HSET', to, unpack(moved))
      redis.call('HDEL', from, unpack(gone))
    end
    split = split + 1
    if split == 2 ^ level then
      level = level + 1
      split = 0
    end
  end
  local index = {}
  function index.get(fp)
    local field = urlField(fp)
    local code = redis.call('HGET', bucketOf(fieldHash(field)), field)
    return code and STATE_LETTER[tonumber(code)] or false
  end
  local function added()
    count = count + 1
    changed = true
    while count > URL_BUCKET_LOAD * (2 ^ level + split) do splitOne() end
  end
  function index.set(fp, state)
    local field = urlField(fp)
    if redis.call('HSET', bucketOf(fieldHash(field)), field, STATE_CODE[state]) == 1 then added() end
  end
  -- Records a URL the index does not know yet, in one command: true when it was new (and now has
  -- `state`), false when it was known already (its state untouched: read it with get).
  function index.claim(fp, state)
    local field = urlField(fp)
    if redis.call('HSETNX', bucketOf(fieldHash(field)), field, STATE_CODE[state]) == 1 then
      added()
      return true
    end
    return false
  end
  function index.flush()
    if changed then redis.call('HSET', partKey, 'iL', level, 'is', split, 'in', count) end
    changed = false
  end
  return index
end
