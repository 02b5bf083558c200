// Redis bytes per queued URL and per seen URL, and seeding speed, at BENCH_URLS (10^6) URLs: the
// URLs are seeded with `crawlfleet seed --urls-file` (the public way in, whatever the frontier's
// keys look like) into a fresh private Redis, with no worker running, so every URL stays queued.
// - bytes per queued URL: (used_memory after − before) / URLs; everything the crawl holds in Redis.
// - bytes per seen URL: MEMORY USAGE summed over the crawl's seen-URL index (its partition's bucket
//   keys, redis-stats.js's indexBytes).
// - seeding URLs/s: URLs / the seed command's wall time (start-up and reading the file included).
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { runMeasured } from './processes.js';
import { Keys } from '@crawlfleet/core';
import { indexBytes, parseInfo } from './redis-stats.js';

const ROOT = new URL('..', import.meta.url).pathname;
const HOSTS = 100;

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** N distinct URLs over 100 hosts, shaped like a site's pages. */
async function writeUrls(file, count) {
  const out = createWriteStream(file);
  for (let i = 0; i < count; i++) {
    if (!out.write(`http://site-${i % HOSTS}.example/section-${i % 97}/page-${i}.html\n`)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}

async function startRedis(dir) {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--maxmemory-policy', 'noeviction'], { stdio: 'ignore' });
  const redis = new Redis(port, '127.0.0.1', { retryStrategy: (n) => (n > 100 ? null : 50) });
  redis.on('error', () => undefined); // refused until the server listens; retried
  await new Promise((resolve) => redis.once('ready', resolve));
  const stop = async () => {
    redis.disconnect();
    child.kill('SIGTERM');
    await once(child, 'exit');
  };
  return { port, redis, stop };
}

async function usedMemory(redis) {
  return Number(parseInfo(await redis.info('memory')).fields.used_memory);
}

export async function benchMemory({ dir, urls, progress }) {
  const file = join(dir, 'urls.txt');
  await writeUrls(file, urls);
  const spider = join(dir, 'spider-memory.json');
  const { writeFileSync } = await import('node:fs');
  writeFileSync(spider, JSON.stringify({ name: 'bench-memory', startUrls: [], obeyRobotsTxt: false, follow: [], items: [{ type: 'page', fields: { title: { css: 'title' } } }] }));
  const server = await startRedis(dir);
  try {
    const prefix = 'bench-memory';
    const crawlId = 'memory';
    const before = await usedMemory(server.redis);
    progress(`memory: seeding ${urls.toLocaleString('en')} URLs into a fresh Redis ...`);
    const started = performance.now();
    const seed = await runMeasured('seed', join(ROOT, 'bin/crawlfleet'), ['seed', spider, '--urls-file', file, '--crawl-id', crawlId, '--redis', `redis://127.0.0.1:${server.port}`], {
      env: { ...process.env, QUEUE_PREFIX: prefix, LOG_LEVEL: 'warn', FRONTIER_PARTITIONS: '1' },
      dir,
    });
    const seconds = (performance.now() - started) / 1000;
    const after = await usedMemory(server.redis);
    // The seen-URL index: the crawl's one partition's bucket keys (FRONTIER_PARTITIONS is 1 here).
    const seen = await indexBytes(server.redis, new Keys(prefix).part(crawlId, 0, 1));
    return {
      urls,
      bytesPerQueuedUrl: Math.round((after - before) / urls),
      bytesPerSeenUrl: Number((seen.bytes / urls).toFixed(1)),
      seenIndexKeys: seen.buckets,
      usedMemoryMB: Math.round((after - before) / 2 ** 20),
      seedSeconds: Number(seconds.toFixed(1)),
      seedingUrlsPerSecond: Math.round(urls / seconds),
      seedCpuSeconds: Number(seed.cpuSeconds.toFixed(1)),
      seedPeakRssMB: seed.peakRssMB,
    };
  } finally {
    await server.stop();
  }
}
