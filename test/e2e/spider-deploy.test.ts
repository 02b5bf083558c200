import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { servePages } from '../fixtures/http-server.mjs';
import { dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor } from '../helpers/cli.js';
import { crawlStatus } from '../helpers/status.js';

// Issue #19, point 5: a worker whose copy of a crawl's spider file is another version never imports
// it, and its jobs wait for the deploy (a bounded time) instead of being dead-lettered at once.

async function startThreePages() {
  const pages: Record<string, string> = {
    '/': '<html><body><h1>home</h1><a href="/a.html">a</a> <a href="/b.html">b</a></body></html>',
    '/a.html': '<html><body><h1>page a</h1></body></html>',
    '/b.html': '<html><body><h1>page b</h1></body></html>',
  };
  return servePages(pages);
}

/** The spider at `version`; the other version also records, when imported, that it was. */
function spiderSource(siteUrl: string, version: 'seeded' | 'other', sideEffect: string): string {
  return `import { appendFileSync } from 'node:fs';
import { defineSpider } from '@crawlfleet/sdk';
${version === 'other' ? `appendFileSync(${JSON.stringify(sideEffect)}, 'imported\\n');` : ''}
export default defineSpider({
  name: 'deploy',
  startUrls: [${JSON.stringify(`${siteUrl}/`)}],
  allowPrivateAddresses: true,
  obeyRobotsTxt: false,
  follow: [{ css: 'a' }],
  itemKeys: { page: 'path' },
  parse(page) {
    return { items: [{ type: 'page', path: new URL(page.url).pathname, title: page.$('h1').text(), version: ${JSON.stringify(version)} }] };
  },
});
`;
}

describe('a spider file deployed while its crawl runs', () => {
  test('the wrong copy is never imported; jobs wait, and the crawl ends exact once the seeded version is in place', async () => {
    const site = await startThreePages();
    const prefix = uniquePrefix('deploy');
    const dir = tempDir('deploy');
    const env = testEnv(prefix);
    const file = join(dir, 'deploy.ts');
    const sideEffect = join(dir, 'other-version-imported');
    const workers: ReturnType<typeof spawnCli>[] = [];
    try {
      writeFileSync(file, spiderSource(site.url, 'seeded', sideEffect));
      const out = join(dir, 'items.jsonl');
      expect((await runCli(['seed', file, '--crawl-id', 'deploy', '--sink', out], { env, cwd: dir })).code).toBe(0);
      // The workers' copy is another version when they start.
      writeFileSync(file, spiderSource(site.url, 'other', sideEffect));
      for (const stage of ['fetcher', 'parser', 'writer']) workers.push(spawnCli(['worker', stage, '--concurrency', '4'], { env, cwd: dir }));
      const status = () => crawlStatus(env, 'deploy');
      await waitFor(async () => ((await status()).counters.deferred ?? 0) >= 2, 60_000, 'jobs to wait for the deploy');
      await sleep(6000);
      const during = await status();
      expect(during.state).toBe('running');
      expect(during.counters.failed).toBe(0);
      // The deploy arrives.
      writeFileSync(file, spiderSource(site.url, 'seeded', sideEffect));
      const waited = await runCli(['wait', '--crawl-id', 'deploy', '--timeout', '90'], { env, timeoutMs: 100_000 });
      if (waited.code !== 0) {
        // Once seen in CI (and not since): say where the crawl stood and what the workers said.
        const stuck = await status();
        for (const w of workers) w.kill('SIGTERM');
        const said = await Promise.all(workers.map((w) => w.result));
        process.stderr.write(
          `spider-deploy: wait exited ${waited.code}; status ${JSON.stringify({ state: stuck.state, counters: stuck.counters, queues: stuck.queues, hosts: stuck.hosts })}\n${said.map((r, i) => `--- worker ${i} ---\n${r.stderr.slice(-3000)}`).join('\n')}\n`,
        );
      }
      expect(waited.code).toBe(0);
      expect(
        readJsonl(out)
          .map((i) => `${i.path} ${i.title} ${i.version}`)
          .sort(),
      ).toEqual(['/ home seeded', '/a.html page a seeded', '/b.html page b seeded']);
      expect((await status()).counters).toMatchObject({ fetched: 3, parsed: 3, written: 3, failed: 0 });
      expect(existsSync(sideEffect)).toBe(false);
    } finally {
      for (const w of workers) w.kill('SIGKILL');
      await site.close();
      await dropPrefix(prefix);
    }
  });

  test('a copy that stays wrong past SPIDER_DEPLOY_WAIT_MS: its jobs end dead-lettered ERR_SPIDER_VERSION, and it was never imported', async () => {
    const site = await startThreePages();
    const prefix = uniquePrefix('deploy-late');
    const dir = tempDir('deploy-late');
    const env = testEnv(prefix, { SPIDER_DEPLOY_WAIT_MS: '3000' });
    const file = join(dir, 'deploy.ts');
    const sideEffect = join(dir, 'other-version-imported');
    const workers: ReturnType<typeof spawnCli>[] = [];
    try {
      writeFileSync(file, spiderSource(site.url, 'seeded', sideEffect));
      expect((await runCli(['seed', file, '--crawl-id', 'late', '--sink', join(dir, 'items.jsonl')], { env, cwd: dir })).code).toBe(0);
      writeFileSync(file, spiderSource(site.url, 'other', sideEffect));
      for (const stage of ['fetcher', 'parser', 'writer']) workers.push(spawnCli(['worker', stage, '--concurrency', '4'], { env, cwd: dir }));
      expect((await runCli(['wait', '--crawl-id', 'late', '--timeout', '90'], { env, timeoutMs: 100_000 })).code).toBe(0);
      const dead = JSON.parse((await runCli(['dead-letters', '--crawl-id', 'late', '--json'], { env })).stdout) as { url: string; code: string; stage: string; reason: string }[];
      expect(dead.map((d) => `${d.stage} ${d.code} ${d.url}`)).toEqual([`fetch ERR_SPIDER_VERSION ${site.url}/`]);
      expect(dead[0]!.reason).toMatch(/^spider module .* has hash [0-9a-f]+, but the crawl was seeded with [0-9a-f]+, for \d+ s: deploy the same spider/);
      expect(existsSync(sideEffect)).toBe(false);
    } finally {
      for (const w of workers) w.kill('SIGKILL');
      await site.close();
      await dropPrefix(prefix);
    }
  });
});
