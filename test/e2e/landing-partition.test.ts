import { join } from 'node:path';
import { Redis } from 'ioredis';
import { partitionOfHost } from '@crawlfleet/core';
import { startServer } from '../fixtures/http-server.mjs';
import { REDIS_URL, deadLetters, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

// Issue 28, A1: a page that lands on another host than the one it was requested from (a redirect
// the browser follows, a script that navigates) keeps every job of its URL in the partition of the
// URL it was admitted under. Before, the write job went to the final URL's partition, where it was
// not pending: the writer dropped it, and the URL ended ERR_JOB_LOST with `written` 0.

const FROM = 'shop.test';
const TO = 'www.shop.test';
const PARTS = 16;

/**
 * shop.test sends every page to www.shop.test: `/app/go` and `/plain/go` by a 302, `/app/js` by a
 * script that replaces the location. www.shop.test serves the pages, each with a title.
 */
async function movedShop() {
  const site = await startServer((req, res) => {
    const host = String(req.headers.host ?? '').replace(/:\d+$/, '');
    const path = req.url ?? '/';
    const target = (p: string) => `http://${TO}:${site.port}${p}`;
    const html = (body: string) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(`<!DOCTYPE html><html><head><title>t</title></head><body>${body}</body></html>`);
    if (path === '/robots.txt') return void res.writeHead(404).end();
    if (host === FROM && path === '/app/go') return void res.writeHead(302, { location: target('/app/landed.html') }).end();
    if (host === FROM && path === '/plain/go') return void res.writeHead(302, { location: target('/plain/landed.html') }).end();
    if (host === FROM && path === '/app/js') return void html(`<script>location.replace(${JSON.stringify(target('/app/js-landed.html'))})</script>`);
    if (host === TO && /^\/(app|plain)\/[\w-]+\.html$/.test(path)) return void html(`<h1 class="t">${host}${path}</h1>`);
    res.writeHead(404).end();
  });
  return site;
}

describe('a page that lands on another host keeps its jobs in the partition it was admitted under', () => {
  const prefixes: string[] = [];
  afterAll(async () => {
    for (const p of prefixes) await dropPrefix(p);
  });

  test('the hosts are in two partitions of 16', () => {
    expect(partitionOfHost(FROM, PARTS)).not.toBe(partitionOfHost(TO, PARTS));
  });

  for (const parseInFetcher of ['0', '1']) {
    test(`rendered (a 302, a script) and plain (a 302) pages moved to another host: every item written once, nothing lost (PARSE_IN_FETCHER=${parseInFetcher})`, async () => {
      const site = await movedShop();
      const redis = new Redis(REDIS_URL);
      const prefix = uniquePrefix('landing');
      prefixes.push(prefix);
      const dir = tempDir('landing');
      try {
        const port = site.port;
        const spider = writeJson(dir, 'moved.json', {
          name: 'moved',
          startUrls: [`http://${FROM}:${port}/app/go`, `http://${FROM}:${port}/app/js`, `http://${FROM}:${port}/plain/go`],
          allowedDomains: [FROM, TO],
          allowedAddresses: ['127.0.0.1'],
          render: { mode: 'never', rules: [{ match: '/app/', mode: 'always' }] },
          items: [{ type: 'page', fields: { title: { css: 'h1.t', required: true } } }],
        });
        const out = join(dir, 'items.jsonl');
        const env = testEnv(prefix, {
          HOST_RESOLVE: `${FROM}:127.0.0.1,${TO}:127.0.0.1`,
          FRONTIER_PARTITIONS: String(PARTS),
          PARSE_IN_FETCHER: parseInFetcher,
          // a lost write job is found and redone (or dead-lettered) soon, so the crawl ends either way
          RECONCILE_INTERVAL_MS: '500',
          RECONCILE_GRACE_MS: '1000',
        });
        const run = await runCli(['crawl', spider, '--crawl-id', 'moved', '--out', out, '--json', '--quiet'], { env, timeoutMs: 150_000 });
        const status = JSON.parse(run.stdout.trim().split('\n').pop() ?? '{}');
        const dead = await deadLetters(redis, prefix, 'moved');
        expect({ code: run.code, dead: dead.map((d) => [d.url, d.code]) }).toEqual({ code: 0, dead: [] });
        const titles = readJsonl(out)
          .map((i) => i.title)
          .sort();
        expect(titles).toEqual([`${TO}/app/js-landed.html`, `${TO}/app/landed.html`, `${TO}/plain/landed.html`]);
        // Each move is a new URL of the crawl (redirected), in the browser as in a plain fetch (issue 28
        // item 17: a browser's redirect to another origin, or a script's, keeps a plain request's rules);
        // the two landings under /app/ are rendered.
        expect(status.counters).toMatchObject({ seen: 6, fetched: 3, rendered: 2, redirected: 3, parsed: 3, items: 3, written: 3, failed: 0 });
      } finally {
        redis.disconnect();
        await site.close();
      }
    });
  }
});
