import { gzipSync } from 'node:zlib';
import { Redis } from 'ioredis';
import { Keys } from '@crawlfleet/core';
import { startServer } from '../fixtures/http-server.mjs';
import { REDIS_URL, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix, writeJson, deadLetters } from '../helpers/cli.js';

const PAGES = ['flaky', 'always500', 'huge', 'bomb', 'slow', 'loop', 'ok', 'notfound'];

async function hostileSite() {
  const hits = new Map<string, number>();
  const bomb = gzipSync(Buffer.alloc(50 * 1024 * 1024, 0x20));
  const site = await startServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname.slice(1);
    const n = (hits.get(path) ?? 0) + 1;
    hits.set(path, n);
    const html = (title: string) => `<html><head><title>${title}</title></head><body></body></html>`;
    switch (path) {
      case 'index.html':
        return void res.writeHead(200, { 'content-type': 'text/html' }).end(`<title>index</title>${PAGES.map((p) => `<a href="/${p}">${p}</a>`).join('')}`);
      case 'flaky':
        if (n <= 2) return void res.writeHead(503, { 'retry-after': '0' }).end('busy');
        return void res.writeHead(200, { 'content-type': 'text/html' }).end(html('flaky at last'));
      case 'always500':
        return void res.writeHead(500).end('broken');
      case 'huge':
        res.writeHead(200, { 'content-type': 'text/html' });
        for (let i = 0; i < 40; i++) res.write(Buffer.alloc(64 * 1024, 0x41));
        return void res.end();
      case 'bomb':
        return void res.writeHead(200, { 'content-type': 'text/html', 'content-encoding': 'gzip' }).end(bomb);
      case 'slow':
        return; // never answers
      case 'loop':
        return void res.writeHead(302, { location: `/loop?n=${n}` }).end();
      case 'ok':
        return void res.writeHead(200, { 'content-type': 'text/html' }).end(html('fine'));
      default:
        return void res.writeHead(404).end('no');
    }
  });
  return { site, hits };
}

describe('hostile servers never crash a worker; each URL ends with the right reason', () => {
  const prefix = uniquePrefix('hostile');
  const dir = tempDir('hostile');
  const env = testEnv(prefix);
  afterAll(() => dropPrefix(prefix));

  test('retries with backoff, size and decompression caps, timeouts, redirect cap', async () => {
    const { site, hits } = await hostileSite();
    const redis = new Redis(REDIS_URL);
    try {
      const spider = writeJson(dir, 'hostile.json', {
        name: 'hostile',
        startUrls: [`${site.url}/index.html`],
        allowPrivateAddresses: true,
        obeyRobotsTxt: false,
        follow: [{ css: 'a' }],
        items: [{ type: 'page', fields: { title: { css: 'title', required: true } } }],
        retry: { attempts: 2 },
        limits: { maxResponseBytes: 1024 * 1024, timeoutMs: 1500, maxRedirects: 3 },
      });
      const out = `${dir}/hostile.jsonl`;
      const run = await runCli(['crawl', spider, '--crawl-id', 'hostile', '--out', out, '--json', '--quiet'], { env, timeoutMs: 90_000 });
      expect(run.code).toBe(0);
      expect(
        readJsonl(out)
          .map((i) => i.title)
          .sort(),
      ).toEqual(['fine', 'flaky at last', 'index']);

      const dead = Object.fromEntries(
        (await deadLetters(redis, prefix, 'hostile')).map((j) => {
          const d = j as { url: string; code: string; reason: string; attempts: number };
          return [new URL(d.url).pathname.slice(1), { code: d.code, reason: d.reason, attempts: d.attempts }];
        }),
      );
      expect(dead).toEqual({
        always500: { code: 'ERR_HTTP_STATUS', reason: 'HTTP 500', attempts: 3 },
        huge: { code: 'ERR_RESPONSE_TOO_LARGE', reason: 'response larger than 1048576 bytes', attempts: 1 },
        bomb: { code: 'ERR_RESPONSE_TOO_LARGE', reason: 'response larger than 1048576 bytes', attempts: 1 },
        slow: { code: 'ETIMEDOUT', reason: expect.stringMatching(/^ETIMEDOUT: Timeout awaiting/), attempts: 3 },
        loop: { code: 'ERR_TOO_MANY_REDIRECTS', reason: expect.stringContaining('Redirected 3 times'), attempts: 1 },
        notfound: { code: 'ERR_HTTP_STATUS', reason: 'HTTP 404', attempts: 1 },
      });
      expect(Object.fromEntries(['flaky', 'always500', 'slow'].map((p) => [p, hits.get(p)]))).toEqual({ flaky: 3, always500: 3, slow: 3 });
      const status = JSON.parse(run.stdout.trim().split('\n').pop()!);
      expect(status.counters).toMatchObject({ seen: 9, failed: 6, retries: 2 + 2 + 2, items: 3, written: 3 });
    } finally {
      redis.disconnect();
      await site.close();
    }
  });

  test('Retry-After of 999999999 s, a date a year ahead, or garbage: each ends in a wait no longer than retry.maxRetryAfterMs, and the crawl finishes', async () => {
    const yearAhead = new Date(Date.now() + 365 * 86_400_000).toUTCString();
    const asks: Record<string, [number, string]> = {
      seconds: [429, '999999999'],
      date: [429, yearAhead],
      garbage: [429, 'after lunch'],
      unavailable: [503, '999999999'],
    };
    const site = await startServer((req, res) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname.slice(1);
      const html = (title: string) => `<html><head><title>${title}</title></head><body><p>${'Text. '.repeat(50)}</p></body></html>`;
      if (path === 'index.html')
        return void res.writeHead(200, { 'content-type': 'text/html' }).end(
          html('index') +
            Object.keys(asks)
              .map((p) => `<a href="/${p}">${p}</a>`)
              .join(''),
        );
      const ask = asks[path];
      if (!ask) return void res.writeHead(404).end();
      // The first request of each is told to come back much later; the next one gets the page.
      if (site.requests.filter((r) => r.path === `/${path}`).length === 1) return void res.writeHead(ask[0], { 'retry-after': ask[1], 'content-type': 'text/plain' }).end('later');
      res.writeHead(200, { 'content-type': 'text/html' }).end(html(path));
    });
    const redis = new Redis(REDIS_URL);
    try {
      const cap = 1500;
      const spider = writeJson(dir, 'retry-after.json', {
        name: 'retry-after',
        startUrls: [`${site.url}/index.html`],
        allowPrivateAddresses: true,
        obeyRobotsTxt: false,
        follow: [{ css: 'a' }],
        items: [{ type: 'page', fields: { title: { css: 'title', required: true } } }],
        retry: { maxRetryAfterMs: cap },
      });
      // While the crawl runs, how far ahead of Redis's clock any fetch job is scheduled: a retry told
      // to come back in 31 years is parked in BullMQ's delayed set with that due time, whatever this
      // machine's speed (scores are the due time in ms times 0x1000).
      const delayedKey = `${new Keys(prefix).queuePrefix('fetch')}:fetch:delayed`;
      let furthestAheadMs = 0;
      let crawling = true;
      const watching = (async () => {
        while (crawling) {
          const [scores, [seconds, micros]] = await Promise.all([redis.zrange(delayedKey, 0, -1, 'WITHSCORES'), redis.time()]);
          const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
          for (let i = 1; i < scores.length; i += 2) furthestAheadMs = Math.max(furthestAheadMs, Math.floor(Number(scores[i]) / 0x1000) - now);
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      const run = await runCli(['crawl', spider, '--crawl-id', 'retry-after', '--out', `${dir}/retry-after.jsonl`, '--json', '--quiet'], { env, timeoutMs: 180_000 }).finally(() => {
        crawling = false;
      });
      await watching;
      // The crawl ends (within 3 minutes: it took over 60 s with `yes > /dev/null` on a core). That the
      // waits were capped is judged on Redis's records below, not on how fast this machine ran it (the
      // old companion check, under 30 s of this process's clock, could fail under load with no bug).
      expect({ code: run.code, stderr: run.code === 0 ? '' : run.stderr.slice(-3000) }).toEqual({ code: 0, stderr: '' });
      expect(
        readJsonl(`${dir}/retry-after.jsonl`)
          .map((i) => i.title)
          .sort(),
      ).toEqual(['date', 'garbage', 'index', 'seconds', 'unavailable']);
      const gaps = Object.fromEntries(
        Object.keys(asks).map((p) => {
          const starts = site.requests.filter((r) => r.path === `/${p}`).map((r) => r.at);
          expect(starts).toHaveLength(2);
          return [p, starts[1]! - starts[0]!];
        }),
      );
      process.stderr.write(`retry-after: waits ${JSON.stringify(gaps)} ms with a cap of ${cap} ms\n`);
      // Capped, not obeyed: the long ones wait at least the cap, less 100 ms for the site's log taking
      // its times in this process (a loaded machine only lengthens a gap, so this lower bound holds
      // under load). Capped, not longer: judged below on Redis's records (the delayed set, the host's
      // hold), not on these gaps. The old upper bound, each gap under cap + 4 s on the site's clock,
      // measured this machine's speed as much as the cap: BullMQ's delayed-job promotion and the
      // fetcher's pick-up ride on the load (3.25 s seen on a shared machine with no bug).
      for (const p of ['seconds', 'date', 'unavailable']) expect(gaps[p]).toBeGreaterThanOrEqual(cap - 100);
      // No job was ever scheduled further ahead than the cap allows: a retry waits the capped
      // Retry-After (the backoff, at most 500 ms here, is below it), a job the limiter defers waits at
      // most the capped hold, or at most 5 s behind a full host (acquireHost-2.lua's longest back-off).
      // Read from Redis's own records, so load does not move it; an uncapped retry reads years.
      process.stderr.write(`retry-after: the furthest-ahead fetch job was due ${furthestAheadMs} ms ahead\n`);
      expect(furthestAheadMs).toBeLessThanOrEqual(cap + 5000);
      // The host's hold ends at most the cap after now: it was set when a 429 was answered, earlier.
      const hold = Number(await redis.hget(new Keys(prefix).polite().host('127.0.0.1'), 'hold'));
      const [seconds, micros] = await redis.time();
      expect(hold).toBeLessThanOrEqual(Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) + cap);
      const status = JSON.parse(run.stdout.trim().split('\n').pop()!);
      expect(status.counters).toMatchObject({ seen: 5, fetched: 5, failed: 0, blocked: 3, items: 5 });
    } finally {
      redis.disconnect();
      await site.close();
    }
  });

  test.each([false, true])('without allowPrivateAddresses, loopback is refused before any request, robots.txt included (SSRF guard; obeyRobotsTxt %s)', async (obeyRobotsTxt) => {
    const { site } = await hostileSite();
    const redis = new Redis(REDIS_URL);
    const crawlId = `ssrf-${obeyRobotsTxt}`;
    try {
      const spider = writeJson(dir, 'ssrf.json', { name: 'ssrf', startUrls: [`${site.url}/index.html`, 'http://localhost:9/x', 'http://[::1]:9/y'], obeyRobotsTxt });
      const run = await runCli(['crawl', spider, '--crawl-id', crawlId, '--out', `${dir}/${crawlId}.jsonl`, '--json', '--quiet'], { env });
      expect(run.code).toBe(0);
      expect(site.requests).toHaveLength(0);
      const dead = await deadLetters(redis, prefix, crawlId);
      expect(dead.map((d) => d.code)).toEqual(['ERR_FORBIDDEN_ADDRESS', 'ERR_FORBIDDEN_ADDRESS', 'ERR_FORBIDDEN_ADDRESS']);
      expect(dead.map((d) => d.attempts)).toEqual([1, 1, 1]);
    } finally {
      redis.disconnect();
      await site.close();
    }
  });
});
