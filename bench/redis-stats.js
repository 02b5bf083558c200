// What a run cost Redis, from two INFO snapshots taken around it (the bench's Redis serves one run
// at a time, so the whole server's delta is the run's; the two INFO calls themselves are noise).
//
// - commands: the sum of `calls` over INFO commandstats. It counts every command Redis executed,
//   those a Lua script runs (redis.call) included, and each EVALSHA once more itself.
// - scripts: EVALSHA + EVAL + FCALL calls, the script invocations.
// - round trips: the requests crawlfleet's processes sent, counted in the clients (a socket write to
//   the Redis port, see count-redis-requests.cjs): one command, one pipeline, one MULTI/EXEC block or
//   one script call each, the client waiting for each reply. Blocking reads (BZPOPMIN) count too.
// - socket reads: INFO stats `total_reads_processed`, the reads Redis made from client sockets.
//   Lower than the round trips when requests of concurrent jobs reach a socket before Redis reads
//   it (they are read at once), so it falls as the load rises: a measure of Redis's work, not of
//   the waits a page makes.
// - Redis CPU: INFO cpu used_cpu_user + used_cpu_sys (the server process, all its threads).

export function parseInfo(text) {
  const fields = {};
  const commands = {};
  for (const line of text.split('\r\n')) {
    const m = line.match(/^cmdstat_([^:]+):calls=(\d+)/);
    if (m) commands[m[1]] = Number(m[2]);
    else {
      const i = line.indexOf(':');
      if (i > 0 && !line.startsWith('#')) fields[line.slice(0, i)] = line.slice(i + 1);
    }
  }
  return { fields, commands };
}

export async function snapshot(redis) {
  const { fields, commands } = parseInfo(await redis.info('everything'));
  return {
    commands,
    reads: Number(fields.total_reads_processed),
    cpu: Number(fields.used_cpu_user) + Number(fields.used_cpu_sys),
    usedMemory: Number(fields.used_memory),
  };
}

const SCRIPT_COMMANDS = ['evalsha', 'eval', 'fcall', 'evalsha_ro', 'eval_ro', 'fcall_ro'];

/** Pure: per-page figures of the delta between two snapshots. */
export function redisCost(before, after, pages, requests) {
  const delta = (name) => (after.commands[name] ?? 0) - (before.commands[name] ?? 0);
  const names = new Set([...Object.keys(after.commands), ...Object.keys(before.commands)]);
  const commands = [...names].reduce((sum, n) => sum + delta(n), 0);
  const scripts = SCRIPT_COMMANDS.reduce((sum, n) => sum + delta(n), 0);
  const top = [...names]
    .map((n) => [n, delta(n)])
    .filter(([, d]) => d > 0)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 8);
  return {
    commandsPerPage: round(commands / pages, 2),
    scriptCallsPerPage: round(scripts / pages, 2),
    roundTripsPerPage: round(requests / pages, 2),
    socketReadsPerPage: round((after.reads - before.reads) / pages, 2),
    cpuMsPerPage: round(((after.cpu - before.cpu) * 1000) / pages, 3),
    topCommandsPerPage: Object.fromEntries(top.map(([n, d]) => [n, round(d / pages, 2)])),
  };
}

export const round = (x, digits) => Number(x.toFixed(digits));

/** Deletes every key of a run's prefix, so the next run starts from the same Redis. */
export async function dropPrefix(redis, prefix) {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await redis.unlink(...keys);
  } while (cursor !== '0');
}

/** Sum of MEMORY USAGE over the index's buckets (`<urlBucket>0` .. `<urlBucket>n-1`). */
export async function indexBytes(redis, k) {
  const [level, split, count] = (await redis.hmget(k.part, 'iL', 'is', 'in')).map(Number);
  const buckets = 2 ** level + split;
  let bytes = 0;
  for (let from = 0; from < buckets; from += 2000) {
    const pipeline = redis.pipeline();
    for (let b = from; b < Math.min(buckets, from + 2000); b++) pipeline.memory('USAGE', `${k.urlBucket}${b}`, 'SAMPLES', '0');
    for (const [, v] of (await pipeline.exec()) ?? []) bytes += Number(v ?? 0);
  }
  return { bytes, buckets, records: count };
}
