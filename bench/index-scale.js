// The seen-URL index at scale (issue #18): BENCH_INDEX_URLS (10^7) URLs admitted into one crawl of
// one partition, in BENCH_INDEX_STEPS (10) seeding runs of `crawlfleet seed --urls-file` into a fresh
// private Redis with the AOF on and no worker running. After each step:
// - bytes per seen URL: MEMORY USAGE summed over the index's bucket keys / URLs so far;
// - AOF bytes per admitted URL: the growth of the AOF file over the step / the step's URLs (the
//   AOF's automatic rewrite is off, so every byte written stays counted);
// - admission URLs/s: the step's URLs / the Redis time its admission scripts took (INFO
//   commandstats, evalsha usec), and / the seed command's wall time (start-up and reading its file
//   included).
// The figures at 10^8 are extrapolated from the last steps (a line through bytes against URLs).
import { spawn } from 'node:child_process';
import { createWriteStream, rmSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Keys } from '@crawlfleet/core';
import { freePort } from './memory.js';
import { runMeasured } from './processes.js';
import { indexBytes, parseInfo } from './redis-stats.js';

const ROOT = new URL('..', import.meta.url).pathname;
const HOSTS = 100;

async function writeUrls(file, from, count) {
  const out = createWriteStream(file);
  for (let i = from; i < from + count; i++) {
    if (!out.write(`http://site-${i % HOSTS}.example/section-${i % 97}/page-${i}.html\n`)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}

async function startRedis(dir) {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    [
      ...['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir, '--maxmemory-policy', 'noeviction'],
      ...['--appendonly', 'yes', '--appendfsync', 'no', '--auto-aof-rewrite-percentage', '0'],
    ],
    { stdio: 'ignore' },
  );
  const redis = new Redis(port, '127.0.0.1', { retryStrategy: (n) => (n > 100 ? null : 50) });
  redis.on('error', () => undefined);
  await new Promise((resolve) => redis.once('ready', resolve));
  return {
    port,
    redis,
    stop: async () => {
      redis.disconnect();
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

async function readings(redis) {
  const text = await redis.info('everything');
  const { fields } = parseInfo(text);
  const usec = /^cmdstat_evalsha:calls=\d+,usec=(\d+)/m.exec(text)?.[1];
  return { aofBytes: Number(fields.aof_current_size), scriptMicros: Number(usec ?? 0), usedMemory: Number(fields.used_memory) };
}

/** Pure: a least-squares line through (x, y) points, evaluated at x. */
export function extrapolate(points, x) {
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  const slope = points.reduce((s, p) => s + (p.x - mx) * (p.y - my), 0) / points.reduce((s, p) => s + (p.x - mx) ** 2, 0);
  return my + slope * (x - mx);
}

export async function benchIndexScale({ dir, urls, steps, progress }) {
  const spider = join(dir, 'spider-index.json');
  const { writeFileSync } = await import('node:fs');
  writeFileSync(spider, JSON.stringify({ name: 'bench-index', startUrls: [], obeyRobotsTxt: false, follow: [], items: [{ type: 'page', fields: { title: { css: 'title' } } }] }));
  const redisDir = join(dir, 'index-redis');
  (await import('node:fs')).mkdirSync(redisDir, { recursive: true });
  const server = await startRedis(redisDir);
  const prefix = 'bench-index';
  const crawlId = 'index';
  const k = new Keys(prefix).part(crawlId, 0, 1);
  const perStep = Math.ceil(urls / steps);
  const rows = [];
  try {
    let admitted = 0;
    for (let step = 0; step < steps; step++) {
      const file = join(dir, `index-urls-${step}.txt`);
      await writeUrls(file, admitted, perStep);
      const before = await readings(server.redis);
      const started = performance.now();
      const seed = await runMeasured('seed', join(ROOT, 'bin/crawlfleet'), ['seed', spider, '--urls-file', file, '--crawl-id', crawlId, '--redis', `redis://127.0.0.1:${server.port}`], {
        env: { ...process.env, QUEUE_PREFIX: prefix, LOG_LEVEL: 'warn', FRONTIER_PARTITIONS: '1' },
        dir,
      });
      const seconds = (performance.now() - started) / 1000;
      rmSync(file, { force: true });
      admitted += perStep;
      const after = await readings(server.redis);
      const index = await indexBytes(server.redis, k);
      const row = {
        urls: admitted,
        bytesPerSeenUrl: Number((index.bytes / index.records).toFixed(2)),
        indexBuckets: index.buckets,
        aofBytesPerAdmittedUrl: Math.round((after.aofBytes - before.aofBytes) / perStep),
        redisMicrosPerUrl: Number(((after.scriptMicros - before.scriptMicros) / perStep).toFixed(2)),
        admissionUrlsPerRedisSecond: Math.round(perStep / ((after.scriptMicros - before.scriptMicros) / 1e6)),
        seedUrlsPerSecond: Math.round(perStep / seconds),
        usedMemoryMB: Math.round(after.usedMemory / 2 ** 20),
        seedPeakRssMB: seed.peakRssMB,
        indexBytes: index.bytes,
      };
      rows.push(row);
      progress(
        `index: ${admitted.toLocaleString('en')} URLs: ${row.bytesPerSeenUrl} B per seen URL, ${row.aofBytesPerAdmittedUrl} AOF B per URL, ${row.admissionUrlsPerRedisSecond} URLs per Redis second, seed ${row.seedUrlsPerSecond} URLs/s`,
      );
    }
  } finally {
    await server.stop();
    rmSync(redisDir, { recursive: true, force: true });
  }
  // Lines through the cumulative figures of the last half of the steps: the index's bytes and the
  // AOF's bytes against the URLs admitted. At 10^8 the index holds the line's value; an admission
  // then writes the line's slope (the AOF's growth per URL).
  let aofSoFar = 0;
  const cumulative = rows.map((r, i) => {
    aofSoFar += r.aofBytesPerAdmittedUrl * (r.urls - (i === 0 ? 0 : rows[i - 1].urls));
    return { urls: r.urls, indexBytes: r.indexBytes, aofBytes: aofSoFar };
  });
  const tail = cumulative.slice(Math.floor(cumulative.length / 2));
  const at = 1e8;
  const aofAt = (x) =>
    extrapolate(
      tail.map((r) => ({ x: r.urls, y: r.aofBytes })),
      x,
    );
  const indexAt = (x) =>
    extrapolate(
      tail.map((r) => ({ x: r.urls, y: r.indexBytes })),
      x,
    );
  return {
    urls,
    steps: rows,
    extrapolatedTo1e8: {
      bytesPerSeenUrl: Number((indexAt(at) / at).toFixed(2)),
      aofBytesPerAdmittedUrl: Math.round(aofAt(at) - aofAt(at - 1)),
    },
  };
}
