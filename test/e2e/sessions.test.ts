// Sessions across the fleet (issue #30), against the bot wall (test/fixtures/bot-wall.mjs) in front of
// the real books site: two fetcher processes crawl its listing pages (index.html, then catalogue/page-2 on), one request at a time. The
// wall's wire checks are off here (got's wire is Node's, not a browser's: that is the browser mode's
// subject); its session checks hold: a session cookie must come back with the User-Agent it began
// with, and one session may make at most 30 requests.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Keys } from '@crawlfleet/core';
import { startBotWall } from '../fixtures/bot-wall.mjs';
import { makeTestCertificates } from '../fixtures/fingerprint-site.mjs';
import { BOOKS_ARCHIVE, serveFolder, unpack } from '../fixtures/static-site.mjs';
import { REDIS_URL, ROOT, dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';
import { freePort } from '../helpers/ports.js';

const references = JSON.parse(readFileSync(join(ROOT, 'test/fixtures/reference/fingerprints.json'), 'utf8'));
const HOST = 'fingerprint.test';
/** index.html and catalogue/page-2 to 50: the copy ends at page 49, so page-50 is a 404 (failed). */
const PAGES = 50;
const BOOKS = 49 * 20;

type Wall = Awaited<ReturnType<typeof startBotWall>>;

function catalogueSpider(name: string, port: number, sessions: object, obeyRobotsTxt = false) {
  return {
    name,
    startUrls: [`https://${HOST}:${port}/index.html`],
    allowedDomains: [`${HOST}:${port}`],
    allowPrivateAddresses: true,
    obeyRobotsTxt,
    follow: [{ css: 'li.next a' }],
    items: [
      {
        type: 'book',
        each: 'article.product_pod',
        key: 'link',
        fields: { link: { css: 'h3 a', attr: 'href', absolute: true, required: true }, title: { css: 'h3 a', attr: 'title' } },
      },
    ],
    // One request at a time, fleet-wide: the wall's count of each session is then exact.
    politeness: { concurrencyPerHost: 1 },
    sessions,
  };
}

/** The sum over the fleet's fetchers of one metric's samples whose line matches `labels`. */
async function fleetSum(ports: number[], metric: string, labels = ''): Promise<number> {
  let sum = 0;
  for (const port of ports) {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (const line of text.split('\n')) if (line.startsWith(metric) && line.includes(labels)) sum += Number(line.split(' ').pop());
  }
  return sum;
}

/** How many requests the wall let through as each of its sessions, in the order they began. */
function requestsBySession(wall: Wall): number[] {
  return [...wall.sessions.values()].map((session: { allowed: number }) => session.allowed);
}

describe('sessions, fleet-wide, behind a bot wall that reads session cookies', () => {
  const prefix = uniquePrefix('sessions');
  const dir = tempDir('sessions');
  const certificates = makeTestCertificates(dir, HOST);
  const env = testEnv(prefix, { HOST_RESOLVE: `${HOST}:127.0.0.1`, NODE_EXTRA_CA_CERTS: certificates.ca });
  const workers: ReturnType<typeof spawnCli>[] = [];
  const metricsPorts: number[] = [];
  let books: { url: string; close: () => Promise<void> };
  let redis: Redis;

  beforeAll(async () => {
    books = await serveFolder(unpack(BOOKS_ARCHIVE));
    redis = new Redis(REDIS_URL);
    for (let i = 0; i < 2; i++) {
      metricsPorts.push(await freePort());
      workers.push(spawnCli(['worker', 'fetcher', '--concurrency', '8'], { env: { ...env, METRICS_PORT: String(metricsPorts[i]), METRICS_HOST: '127.0.0.1' } }));
    }
    workers.push(spawnCli(['worker', 'parser'], { env }), spawnCli(['worker', 'writer'], { env }));
    // Both fetchers serve from the first page on.
    for (const port of metricsPorts) await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 60_000, 'a fetcher');
  });
  afterAll(async () => {
    for (const w of workers) w.kill('SIGTERM');
    const results = await Promise.all(workers.map((w) => w.result));
    expect(results.map((r) => (r.code === 0 ? 0 : r.stderr.slice(-2000)))).toEqual(workers.map(() => 0));
    await books?.close();
    redis?.disconnect();
    await dropPrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  });

  /** One crawl of the catalogue behind a new wall: its items, status and the wall. */
  async function crawlBehindWall(crawlId: string, sessions: object, maxRequests: number, obeyRobotsTxt = false) {
    const wall = await startBotWall({
      cert: readFileSync(certificates.cert),
      key: readFileSync(certificates.key),
      upstream: books.url,
      references,
      limits: { maxRequests, windowMs: 3_600_000, wire: 'ignored' },
    });
    try {
      const out = join(dir, `${crawlId}.jsonl`);
      const seeded = await runCli(['seed', writeJson(dir, `${crawlId}.json`, catalogueSpider(crawlId, wall.port, sessions, obeyRobotsTxt)), '--crawl-id', crawlId, '--sink', out], { env });
      expect(seeded.code).toBe(0);
      const waited = await runCli(['wait', '--crawl-id', crawlId, '--timeout', '150'], { env, timeoutMs: 160_000 });
      expect(waited.code).toBe(0);
      const status = JSON.parse((await runCli(['status', '--crawl-id', crawlId, '--json'], { env })).stdout);
      return { items: readJsonl(out), status, wall };
    } finally {
      await wall.close();
    }
  }

  test('a host sees one identity for many requests; the block at its 31st retires it, and the page goes again under a new one', async () => {
    const { items, status, wall } = await crawlBehindWall('kept', {}, 30);
    expect(new Set(items.map((i) => i.link)).size).toBe(BOOKS);
    expect(status.counters).toMatchObject({ fetched: PAGES, items: BOOKS, written: BOOKS, failed: 1, blocked: 1, retries: 1 });
    // 30 requests as the first session, its 31st blocked, then the other 20 pages as a second one.
    expect(wall.counts).toEqual({ allowed: PAGES, blocked: 1, sessionsStarted: 2 });
    expect(wall.blocks.map((b) => b.reason)).toEqual(['session-rate']);
    // Two fetcher processes, each with its own rotation of User-Agents, sent each session as one
    // browser: a cookie back under another User-Agent would have been blocked (session-user-agent).
    expect(requestsBySession(wall)).toEqual([30, 20]);
    expect(await redis.zcard(new Keys(prefix).polite().sessionsAlive(HOST))).toBe(1);
    // The fleet's metrics say the same: 2 sessions begun, 1 retired for its block, 1 alive.
    expect(await fleetSum(metricsPorts, 'crawlfleet_sessions_begun_total')).toBe(2);
    expect(await fleetSum(metricsPorts, 'crawlfleet_sessions_retired_total', 'reason="blocked"')).toBe(1);
    expect(await fleetSum(metricsPorts, 'crawlfleet_sessions_retired_total')).toBe(1);
    for (const port of metricsPorts) expect(await fleetSum([port], 'crawlfleet_sessions_alive')).toBe(1);
    // A reset (and gc) forgets the crawl's sessions with the rest of it.
    const polite = new Keys(prefix).polite();
    const [alive] = await redis.zrange(polite.sessionsAlive(HOST), 0, -1);
    const id = alive!.split(' ')[2]!;
    expect(await redis.exists(polite.sessions(HOST, 'kept'), polite.sessionCookies(HOST, 'kept', id))).toBe(2);
    expect((await runCli(['reset', '--crawl-id', 'kept'], { env })).code).toBe(0);
    expect(await redis.exists(polite.sessions(HOST, 'kept'), polite.sessionCookies(HOST, 'kept', id), polite.sessionsAlive(HOST))).toBe(0);
  });

  test('maxUses retires a session before the wall sees too much of it: 5 sessions of 10 requests, no block', async () => {
    const { items, status, wall } = await crawlBehindWall('uses', { maxUses: 10 }, 30);
    expect(items).toHaveLength(BOOKS);
    expect(status.counters).toMatchObject({ fetched: PAGES, failed: 1, blocked: 0, retries: 0 });
    expect(wall.counts).toEqual({ allowed: PAGES, blocked: 0, sessionsStarted: 5 });
    expect(requestsBySession(wall)).toEqual([10, 10, 10, 10, 10]);
  });

  test("robots.txt goes as the host's session too (its User-Agent and headers, no cookie kept): the session it begins is counted once", async () => {
    const begunBefore = await fleetSum(metricsPorts, 'crawlfleet_sessions_begun_total');
    const { items, status, wall } = await crawlBehindWall('robots', {}, 100, true);
    expect(items).toHaveLength(BOOKS);
    expect(status.counters).toMatchObject({ fetched: PAGES, failed: 1, blocked: 0 });
    expect(wall.visits.filter((v) => v.path === '/robots.txt')).toHaveLength(1);
    // one identity: robots.txt's visit and the pages' carry one User-Agent (its cookie is not kept)
    expect(new Set(wall.visits.map((v) => v.userAgent)).size).toBe(1);
    expect(wall.counts).toEqual({ allowed: PAGES + 1, blocked: 0, sessionsStarted: 2 });
    expect((await fleetSum(metricsPorts, 'crawlfleet_sessions_begun_total')) - begunBefore).toBe(1);
  });

  test('without sessions, every request is a stranger: no cookie comes back, and the User-Agent changes', async () => {
    const { items, status, wall } = await crawlBehindWall('none', { enabled: false }, 30);
    expect(items).toHaveLength(BOOKS);
    expect(status.counters).toMatchObject({ fetched: PAGES, failed: 1, blocked: 0 });
    expect(wall.counts).toEqual({ allowed: PAGES, blocked: 0, sessionsStarted: PAGES });
    expect(new Set(wall.visits.map((v) => v.userAgent)).size).toBeGreaterThan(1);
  });
});
