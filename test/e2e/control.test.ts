import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { catalogueSpider, siteShape, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { Redis } from 'ioredis';
import { Keys } from '@crawlfleet/core';
import { CLI, REDIS_URL, dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';
import { crawlStatus } from '../helpers/status.js';

const shape = siteShape(100, 20);

describe('crawl control: pause, resume, cancel, reset', () => {
  test('a paused crawl fetches nothing until resumed, then finishes; cancel ends a crawl with wait exit 1', async () => {
    const site = await startCatalogueSite(shape);
    const prefix = uniquePrefix('control');
    const dir = tempDir('control');
    const env = testEnv(prefix);
    const workers: ReturnType<typeof spawnCli>[] = [];
    try {
      const spider = writeJson(dir, 'spider.json', catalogueSpider(site.url));
      await runCli(['seed', spider, '--crawl-id', 'paused', '--sink', join(dir, 'paused.jsonl')], { env });
      expect((await runCli(['pause', '--crawl-id', 'paused'], { env })).stdout).toContain('crawl paused paused');
      workers.push(...['fetcher', 'parser', 'writer'].map((s) => spawnCli(['worker', s], { env })));
      // The fetcher takes the seed's job and parks it (workers start slowly on a loaded machine).
      const statusNow = () => crawlStatus(env, 'paused');
      await waitFor(async () => (await statusNow()).queues.fetch.delayed === 1, 60_000, 'the paused crawl job parked');
      await new Promise((r) => setTimeout(r, 1000));
      const status = await statusNow();
      expect(status.state).toBe('paused');
      expect(status.queues.fetch).toMatchObject({ waiting: 0, active: 0, delayed: 1 });
      expect(site.requests).toHaveLength(0);
      // Parked until resume, not re-taken every minute: a paused crawl costs nothing while it waits.
      const redis = new Redis(REDIS_URL);
      try {
        const keys = new Keys(prefix);
        expect(await redis.smembers(keys.part('paused', 0, 1).parked.fetch)).toHaveLength(1);
        const [, score] = await redis.zrange(`${keys.queuePrefix('fetch')}:fetch:delayed`, 0, 0, 'WITHSCORES');
        expect(Math.floor(Number(score) / 0x1000) - Date.now()).toBeGreaterThan(23 * 3600_000);
      } finally {
        redis.disconnect();
      }

      // `wait` on a terminal redraws the crawl's progress line; in a script it writes only the outcome.
      const plain = await runCli(['wait', '--crawl-id', 'paused', '--timeout', '2'], { env });
      expect({ code: plain.code, stderr: plain.stderr }).toEqual({ code: 124, stderr: 'crawl paused still running after 2 s\n' });
      const onTerminal = spawnSync('script', ['-qec', `${CLI} wait --crawl-id paused --timeout 3`, '/dev/null'], { env, encoding: 'utf8', timeout: 60_000 });
      expect(onTerminal.status).toBe(124);
      expect(onTerminal.stdout).toContain('\r\x1b[2Kpaused | 0/');
      expect(onTerminal.stdout).toMatch(/paused \| 0\/\d+ pages \| 0\.0\/s \| queues fetch 1 parse 0 write 0 \|/);
      expect(onTerminal.stdout).toContain('crawl paused still running after 3 s');

      expect((await runCli(['resume', '--crawl-id', 'paused'], { env })).code).toBe(0);
      expect((await runCli(['wait', '--crawl-id', 'paused', '--timeout', '60'], { env })).code).toBe(0);
      expect(readJsonl(join(dir, 'paused.jsonl'))).toHaveLength(200);

      // cancel: the workers drop the crawl's jobs; wait says 1.
      await runCli(['pause', '--crawl-id', 'paused'], { env }); // a no-op on a done crawl
      const big = await startCatalogueSite(siteShape(2000, 25));
      try {
        const bigSpider = writeJson(dir, 'big.json', catalogueSpider(big.url));
        const seeded = await runCli(['seed', bigSpider, '--crawl-id', 'doomed', '--sink', join(dir, 'doomed.jsonl')], { env });
        expect(seeded.code).toBe(0);
        expect((await runCli(['cancel', '--crawl-id', 'doomed'], { env })).stdout).toContain('crawl doomed cancelled');
        expect((await runCli(['wait', '--crawl-id', 'doomed', '--timeout', '10'], { env })).code).toBe(1);
        // The workers drop the cancelled crawl's jobs: its requests stop, far short of the 2,162 pages.
        await new Promise((r) => setTimeout(r, 1000));
        const stopped = big.requests.length;
        await new Promise((r) => setTimeout(r, 1000));
        expect(big.requests.length).toBe(stopped);
        expect(stopped).toBeLessThan(1000);
        const status = JSON.parse((await runCli(['status', '--crawl-id', 'doomed', '--json'], { env })).stdout);
        expect(status.state).toBe('cancelled');
        expect(status.queues.fetch).toMatchObject({ waiting: 0, active: 0, delayed: 0 });
      } finally {
        await big.close();
      }
      expect((await runCli(['wait', '--crawl-id', 'nope', '--timeout', '1'], { env })).code).toBe(2);
    } finally {
      for (const w of workers) w.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.result));
      await site.close();
      await dropPrefix(prefix);
    }
  });

  test('wait times out with 124; reset forgets the crawl but keeps its items, so it can start over', async () => {
    const site = await startCatalogueSite(shape);
    const prefix = uniquePrefix('reset');
    const dir = tempDir('reset');
    const env = testEnv(prefix);
    try {
      const spider = writeJson(dir, 'spider.json', catalogueSpider(site.url));
      const out = join(dir, 'items.jsonl');
      await runCli(['seed', spider, '--crawl-id', 'again', '--sink', out], { env });
      expect((await runCli(['wait', '--crawl-id', 'again', '--timeout', '1'], { env })).code).toBe(124);
      expect((await runCli(['crawl', spider, '--crawl-id', 'again', '--out', out, '--quiet'], { env })).code).toBe(0);
      const served = site.requests.length;
      const reset = await runCli(['reset', '--crawl-id', 'again'], { env });
      expect(reset.code).toBe(0);
      expect((await runCli(['status', '--crawl-id', 'again', '--json'], { env })).code).toBe(2);
      expect(existsSync(out)).toBe(true);
      expect(readJsonl(out)).toHaveLength(200);
      const rerun = await runCli(['crawl', spider, '--crawl-id', 'again', '--out', out, '--json', '--quiet'], { env });
      expect(rerun.code).toBe(0);
      expect(site.requests.length).toBe(served * 2);
      expect(JSON.parse(rerun.stdout.trim().split('\n').pop()!).counters.fetched).toBe(served);
      expect(readJsonl(out)).toHaveLength(200);
    } finally {
      await site.close();
      await dropPrefix(prefix);
    }
  });
});
