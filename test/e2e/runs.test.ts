import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { servePages } from '../fixtures/http-server.mjs';
import { dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';

// Issue #19, points 1 and 2: a crawl id seeded again (resumed, or reset and registered anew) while the
// fleet's processes run. Every job belongs to one run of its crawl; a job of an older run changes
// nothing in a newer one, and writers follow the crawl's current sink.

/** `/` links to `/a.html`, `/b.html` and `/slow.html`; each page has its title in an h1. */
async function startRunsSite() {
  const pages: Record<string, string> = {
    '/': '<html><body><h1>home</h1><a href="/a.html">a</a> <a href="/b.html">b</a> <a href="/slow.html">slow</a></body></html>',
    '/a.html': '<html><body><h1>page a</h1></body></html>',
    '/b.html': '<html><body><h1>page b</h1></body></html>',
    '/slow.html': '<html><body><h1>page slow</h1><a href="/c.html">c</a></body></html>',
    '/c.html': '<html><body><h1>page c</h1></body></html>',
    '/d.html': '<html><body><h1>page d</h1></body></html>',
  };
  return servePages(pages);
}

const ITEMS = [{ type: 'page', fields: { title: { css: 'h1', required: true } } }];
const titles = (items: Record<string, unknown>[]) => items.map((i) => i.title).sort();

describe('runs of a crawl', () => {
  test('a crawl seeded again with another sink: the running writer writes to the new one', async () => {
    const site = await startRunsSite();
    const prefix = uniquePrefix('resink');
    const dir = tempDir('resink');
    const env = testEnv(prefix);
    const workers = ['fetcher', 'parser', 'writer'].map((stage) => spawnCli(['worker', stage, '--concurrency', '4'], { env }));
    try {
      const spider = writeJson(dir, 'spider.json', { name: 'resink', startUrls: [`${site.url}/a.html`], allowPrivateAddresses: true, obeyRobotsTxt: false, items: ITEMS });
      const first = join(dir, 'first.jsonl');
      const second = join(dir, 'second.jsonl');
      expect((await runCli(['seed', spider, '--crawl-id', 'resink', '--sink', first], { env })).code).toBe(0);
      expect((await runCli(['wait', '--crawl-id', 'resink', '--timeout', '60'], { env, timeoutMs: 70_000 })).code).toBe(0);
      expect(titles(readJsonl(first))).toEqual(['page a']);
      // Resumed with another sink and one more URL: the new page's item goes to the new sink.
      expect((await runCli(['seed', spider, `${site.url}/b.html`, '--crawl-id', 'resink', '--sink', second], { env })).code).toBe(0);
      expect((await runCli(['wait', '--crawl-id', 'resink', '--timeout', '60'], { env, timeoutMs: 70_000 })).code).toBe(0);
      expect(existsSync(second) ? titles(readJsonl(second)) : []).toEqual(['page b']);
      expect(titles(readJsonl(first))).toEqual(['page a']);
    } finally {
      for (const w of workers) w.kill('SIGKILL');
      await site.close();
      await dropPrefix(prefix);
    }
  });

  test('reset while a parser is mid-page, then seeded again: the old run changes nothing in the new one; items and counters are exact', async () => {
    const site = await startRunsSite();
    const prefix = uniquePrefix('reruns');
    const dir = tempDir('reruns');
    const env = testEnv(prefix);
    const marker = join(dir, 'slow-started');
    const hold = join(dir, 'hold');
    // A code spider whose parse hook holds /slow.html for 3 s while the file \`hold\` exists, so that
    // the reset comes mid-page; the old run's parse then ends, and its finish runs, before the new run.
    const spiderFile = (file: string, extra: object) => {
      const path = join(dir, file);
      writeFileSync(
        path,
        `import { existsSync, writeFileSync } from 'node:fs';
import { defineSpider } from '@crawlfleet/sdk';
export default defineSpider({
  name: 'reruns',
  startUrls: [${JSON.stringify(`${site.url}/`)}],
  allowPrivateAddresses: true,
  obeyRobotsTxt: false,
  follow: [{ css: 'a' }],
  items: ${JSON.stringify(ITEMS)},
  ...${JSON.stringify(extra)},
  async parse(page) {
    if (page.url.endsWith('/slow.html') && existsSync(${JSON.stringify(hold)})) {
      writeFileSync(${JSON.stringify(marker)}, String(Date.now()));
      await new Promise((resolve) => setTimeout(resolve, 3000));
    }
  },
});
`,
      );
      return path;
    };
    // The new run stops at depth 1: /c.html, which only the old run's /slow.html leads to, is not its.
    const spider = spiderFile('reruns.ts', {});
    const shallow = spiderFile('reruns-shallow.ts', { maxDepth: 1 });
    const workers = ['fetcher', 'parser', 'writer'].map((stage) => spawnCli(['worker', stage, '--concurrency', '4'], { env, cwd: dir }));
    try {
      const first = join(dir, 'first.jsonl');
      const second = join(dir, 'second.jsonl');
      writeFileSync(hold, '');
      expect((await runCli(['seed', spider, '--crawl-id', 'reruns', '--sink', first], { env, cwd: dir })).code).toBe(0);
      await waitFor(() => existsSync(marker), 60_000, 'the parser to start on /slow.html');
      const reset = await runCli(['reset', '--crawl-id', 'reruns'], { env });
      expect(reset.code).toBe(0);
      await sleep(4000);
      rmSync(hold);
      // The new run: the same spider but for its depth, and /d.html too.
      expect((await runCli(['seed', shallow, `${site.url}/d.html`, '--crawl-id', 'reruns', '--sink', second], { env, cwd: dir })).code).toBe(0);
      expect((await runCli(['wait', '--crawl-id', 'reruns', '--timeout', '90'], { env, timeoutMs: 100_000 })).code).toBe(0);

      // The new run found and stored its pages, /slow.html included, and nothing of the old run's.
      expect(titles(readJsonl(second))).toEqual(['home', 'page a', 'page b', 'page d', 'page slow']);
      const status = JSON.parse((await runCli(['status', '--crawl-id', 'reruns', '--json'], { env })).stdout);
      expect(status.state).toBe('done');
      expect(status.counters).toMatchObject({ seen: 5, fetched: 5, parsed: 5, written: 5, failed: 0, retries: 0 });
      const dead = await runCli(['dead-letters', '--crawl-id', 'reruns', '--json'], { env });
      expect(JSON.parse(dead.stdout)).toEqual([]);
    } finally {
      for (const w of workers) w.kill('SIGKILL');
      await site.close();
      await dropPrefix(prefix);
    }
  });
});
