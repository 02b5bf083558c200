-- A URL moves forward through its stages: q (queued) < d (fetched) < p (parsed) < w (written).
-- Each stage's finish records its letter, never moving the URL backwards, so the letter is the
-- stage's durable done marker. Other letters (S out of scope, D too deep, L over maxPages, R disallowed
-- by robots.txt, H over limits.maxPagesPerHost) are verdicts outside this line.
local STAGE_RANK = {q = 1, d = 2, p = 3, w = 4}

-- Has a URL in `state` (a letter, or false) reached `target`?
local function reached(state, target)
  local have, want = STAGE_RANK[state or ''], STAGE_RANK[target]
  return have ~= nil and want ~= nil and have >= want
end
