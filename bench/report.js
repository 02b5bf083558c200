// Pure: the figures of each run, their medians per site and mode, and the printed table.

const round = (x, digits = 0) => (x === undefined || x === null || Number.isNaN(x) ? null : Number(x.toFixed(digits)));
export const median = (xs) => {
  const v = xs.filter((x) => x !== null && x !== undefined).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
};

/** Each run with pages/s, its ratio to the bare loop of the same site and round, CPU per 1,000 pages. */
export function perRunFigures(runs) {
  return runs.map((r) => {
    const bare = runs.find((b) => b.mode === 'bare' && b.site === r.site && b.round === r.round);
    const pagesPerSecond = r.pages / r.seconds;
    const cpu = r.processes.reduce((s, p) => s + p.cpuSeconds, 0);
    return {
      site: r.site,
      mode: r.mode,
      round: r.round,
      ...(r.mix ? { mix: r.mix } : {}),
      seconds: round(r.seconds, 2),
      pages: r.pages,
      items: r.items,
      pagesPerSecond: round(pagesPerSecond),
      ratioToBare: bare ? round(pagesPerSecond / (bare.pages / bare.seconds), 2) : null,
      cpuSecondsPer1000Pages: round((cpu * 1000) / r.pages, 2),
      peakRssMB: Object.fromEntries(r.processes.map((p) => [p.role, p.peakRssMB])),
      ...(r.redis ? { redis: r.redis } : {}),
      ...(r.shards ? { shards: r.shards } : {}),
      ...(r.storeItemsPerSecond !== undefined ? { storeItemsPerSecond: r.storeItemsPerSecond } : {}),
      ...(r.storeCpuSecondsPer1000Pages !== undefined ? { storeCpuSecondsPer1000Pages: r.storeCpuSecondsPer1000Pages } : {}),
    };
  });
}

/** Per mode: the median of each figure over its runs (peak RSS per process role). */
export function medianFigures(figures) {
  const out = {};
  for (const mode of [...new Set(figures.map((f) => f.mode))]) {
    const runs = figures.filter((f) => f.mode === mode);
    const of = (get) => median(runs.map(get));
    const roles = [...new Set(runs.flatMap((r) => Object.keys(r.peakRssMB)))];
    out[mode] = {
      runs: runs.length,
      ...(runs[0].mix ? { mix: runs[0].mix } : {}),
      pagesPerSecond: of((r) => r.pagesPerSecond),
      ratioToBare: of((r) => r.ratioToBare),
      cpuSecondsPer1000Pages: of((r) => r.cpuSecondsPer1000Pages),
      peakRssMB: Object.fromEntries(roles.map((role) => [role, of((r) => r.peakRssMB[role])])),
      ...(runs[0].redis
        ? {
            redis: {
              commandsPerPage: of((r) => r.redis.commandsPerPage),
              scriptCallsPerPage: of((r) => r.redis.scriptCallsPerPage),
              roundTripsPerPage: of((r) => r.redis.roundTripsPerPage),
              socketReadsPerPage: of((r) => r.redis.socketReadsPerPage),
              cpuMsPerPage: of((r) => r.redis.cpuMsPerPage),
            },
          }
        : {}),
      ...(runs[0].storeItemsPerSecond !== undefined ? { storeItemsPerSecond: of((r) => r.storeItemsPerSecond) } : {}),
      ...(runs[0].shards ? { busiestShardShare: of((r) => r.shards.busiestShare) } : {}),
    };
  }
  return out;
}

const cell = (v) => (v === null || v === undefined ? '-' : String(v));

function rows(headers, lines) {
  const widths = headers.map((h, i) => Math.max(h.length, ...lines.map((l) => cell(l[i]).length)));
  const fmt = (l) => l.map((c, i) => cell(c).padEnd(widths[i])).join('  ');
  return [fmt(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...lines.map(fmt)].join('\n');
}

export function printTable(results) {
  const headers = ['site', 'mode', 'round', 'pages/s', '×bare', 'CPU s/1k pages', 'peak RSS MB', 'Redis cmds/page', 'round trips/page', 'Redis CPU ms/page', 'store items/s'];
  const lines = results.runs.map((r) => [
    r.site,
    r.mode + (r.mix && !r.mode.includes(r.mix) ? ` ${r.mix}` : ''),
    r.round,
    r.pagesPerSecond,
    r.ratioToBare,
    r.cpuSecondsPer1000Pages,
    Object.entries(r.peakRssMB)
      .filter(([role]) => !['seed', 'wait', 'status'].includes(role))
      .map(([, v]) => v)
      .join('/'),
    r.redis?.commandsPerPage,
    r.redis?.roundTripsPerPage,
    r.redis?.cpuMsPerPage,
    r.storeItemsPerSecond,
  ]);
  console.log('\nRuns:');
  console.log(rows(headers, lines));
  const medianLines = Object.entries(results.medians).flatMap(([site, modes]) =>
    Object.entries(modes).map(([mode, m]) => [
      site,
      mode + (m.mix ? ` ${m.mix}` : ''),
      `${m.runs} runs`,
      m.pagesPerSecond,
      m.ratioToBare,
      m.cpuSecondsPer1000Pages,
      Object.entries(m.peakRssMB)
        .filter(([role]) => !['seed', 'wait', 'status'].includes(role))
        .map(([, v]) => v)
        .join('/'),
      m.redis?.commandsPerPage,
      m.redis?.roundTripsPerPage,
      m.redis?.cpuMsPerPage,
      m.storeItemsPerSecond,
    ]),
  );
  console.log(`\nMedians (peak RSS per process: fetcher/parser(s)/writer for fleet-np):`);
  console.log(rows(headers, medianLines));
  if (Object.keys(results.npMixTrial).length) console.log(`\nfleet-np mixes tried in round 1 (pages/s): ${JSON.stringify(results.npMixTrial)}`);
  if (results.memory) {
    const m = results.memory;
    console.log(
      `\nRedis at ${m.urls.toLocaleString('en')} queued URLs: ${m.bytesPerQueuedUrl} bytes per queued URL, ${m.bytesPerSeenUrl} bytes per seen URL (${m.seenIndexKeys} key(s)); seeding ${m.seedingUrlsPerSecond} URLs/s (${m.seedSeconds} s)`,
    );
  }
  if (results.longTail) {
    console.log(`\nLong tail (one request per host at a time, ${results.longTail.delayMs} ms apart):`);
    console.log(
      rows(
        ['hosts x pages', 'mode', 'seconds', 'ideal s', '× ideal', 'deferrals', 'most in flight on a host', 'smallest gap ms'],
        results.longTail.runs.map((r) => [r.shape, r.mode, r.seconds, r.idealSeconds, r.ratioToIdeal, r.deferred, r.mostInFlightOnOneHost, r.smallestGapMs]),
      ),
    );
  }
  if (results.indexScale) {
    const x = results.indexScale;
    console.log('\nThe seen-URL index at scale (one crawl, one partition):');
    console.log(
      rows(
        ['URLs', 'bytes/seen URL', 'buckets', 'AOF bytes/admitted URL', 'Redis µs/URL', 'URLs per Redis s', 'seed URLs/s', 'used memory MB'],
        x.steps.map((r) => [r.urls, r.bytesPerSeenUrl, r.indexBuckets, r.aofBytesPerAdmittedUrl, r.redisMicrosPerUrl, r.admissionUrlsPerRedisSecond, r.seedUrlsPerSecond, r.usedMemoryMB]),
      ),
    );
    console.log(`extrapolated to 10^8 URLs: ${x.extrapolatedTo1e8.bytesPerSeenUrl} bytes per seen URL, ${x.extrapolatedTo1e8.aofBytesPerAdmittedUrl} AOF bytes per admitted URL`);
  }
}
