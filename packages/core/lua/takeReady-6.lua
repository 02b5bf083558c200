--[[
  Feeds the fetch stage from a partition's ready hosts (takeReady.lua), outside a finish or an
  admission: after a resume, and as the reconciler's backstop (a host whose turn was too far ahead
  when the last take ran, a fetcher that died after a take).

  KEYS[1] part   KEYS[2] the fetch pending set   KEYS[3] requests   KEYS[4] hosts   KEYS[5] ready
  KEYS[6] backlog
  ARGV[1] window   ARGV[2] the fewest free places worth a take   ARGV[3] horizon (ms)
  ARGV[4] the prefix of the host queue keys   ARGV[5] the crawl id

  Returns {job id, request, wait ms, ...} to add to the fetch queue.
]]
--!include hosts.lua
--!include takeReady.lua
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local K = {part = KEYS[1], pendingFetch = KEYS[2], requests = KEYS[3], hosts = KEYS[4], ready = KEYS[5], backlog = KEYS[6], queuePrefix = ARGV[4], crawlId = ARGV[5]}
return takeReady(K, now, tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]))
