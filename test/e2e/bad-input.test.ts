import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { Keys } from '@crawlfleet/core';
import { getDeadLetters } from '@crawlfleet/crawl';
import { catalogueSpider, siteShape, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { REDIS_URL, dropPrefix, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';

describe('bad input gets a clear error and loses nothing', () => {
  const dir = tempDir('bad');
  const prefix = uniquePrefix('bad');
  const env = testEnv(prefix);
  afterAll(() => dropPrefix(prefix));

  const base = catalogueSpider('http://127.0.0.1:9');
  const product = base.items[0]!;

  test.each([
    ['a bad regex', { ...base, items: [{ ...product, fields: { ...product.fields, price: { css: '.price', regex: '([0-9' } } }] }, /items\[0\]\.fields\.price\.regex: invalid regular expression/],
    ['an unknown field type', { ...base, items: [{ ...product, fields: { ...product.fields, title: { css: 'h1', type: 'float' } } }] }, /items\[0\]\.fields\.title\.type: /],
    ['a follow rule without css or json', { ...base, follow: [{ allow: ['x'] }] }, /follow\[0\]: a follow rule needs exactly one of css or json/],
    ['a bad JSON path', { ...base, follow: [{ json: 'items[*.id', format: '/p/{}' }] }, /follow\[0\]\.json: invalid JSON path "items\[\*\.id": expected "\]" after "\[\*" at character 8/],
    [
      'css and json fields in one rule',
      { ...base, items: [{ ...product, fields: { ...product.fields, stock: { json: 'stock.count' } } }] },
      /items\[0\]\.fields\.stock: a rule's fields are all css or all json: "title" uses css, "stock" uses json/,
    ],
    ['an unknown key', { ...base, maxDepht: 3 }, /\(top level\): unknown key\(s\) "maxDepht"/],
    ['a key that is not a field', { ...base, items: [{ ...product, key: 'isbn' }] }, /items\[0\]\.key: key "isbn" is not one of the fields/],
  ])('a spider with %s exits 2, naming the file and the path', async (_what, spider, pattern) => {
    const file = writeJson(dir, 'bad-spider.json', spider);
    for (const command of [
      ['crawl', file],
      ['seed', file],
    ]) {
      const run = await runCli(command, { env });
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(`${file}: `);
      expect(run.stderr).toMatch(pattern);
    }
  });

  test('a spider file that is not JSON exits 2 naming the file', async () => {
    const file = `${dir}/broken.json`;
    (await import('node:fs')).writeFileSync(file, '{"name": "x",');
    const run = await runCli(['crawl', file], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`${file}: not valid JSON`);
  });

  test('a URLs file with a bad line exits 2, naming the file and the line', async () => {
    const spider = writeJson(dir, 'seedable.json', base);
    const urls = `${dir}/urls.txt`;
    (await import('node:fs')).writeFileSync(urls, '# seeds\nhttp://127.0.0.1:9/a\nnot a url\n');
    const run = await runCli(['seed', spider, '--urls-file', urls], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`${urls}:3: "not a url" is not an http(s) URL`);
  });

  test('a bad proxy list exits 2 naming the file and line (or PROXY_LIST), without showing the password', async () => {
    const spider = writeJson(dir, 'proxied.json', base);
    const file = `${dir}/proxies.txt`;
    (await import('node:fs')).writeFileSync(file, '# pool\nhttp://127.0.0.1:3128\n\nsocks5://bob:hunter2@127.0.0.1:1080\n');
    for (const command of [
      ['crawl', spider, '--proxies', file],
      ['worker', 'fetcher', '--proxies', file],
    ]) {
      const run = await runCli(command, { env });
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(`${file}:4: must be http:// or https://, got socks5:`);
      expect(run.stderr).not.toContain('hunter2');
    }
    const fromEnv = await runCli(['crawl', spider], { env: { ...env, PROXY_LIST: 'http://127.0.0.1:3128,http//bob:hunter2@nowhere' } });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toContain('PROXY_LIST: proxy 2: not a URL');
    expect(fromEnv.stderr).not.toContain('hunter2');
  });

  test('bad usage exits 2', async () => {
    expect((await runCli(['crawl'], { env })).code).toBe(2);
    expect((await runCli(['worker', 'cooker'], { env })).code).toBe(2);
    expect((await runCli(['wait', '--crawl-id', 'has:colon'], { env })).code).toBe(2);
    expect((await runCli(['crawl', 'x.json', '--concurrency', '0'], { env })).code).toBe(2);
  });

  test('an unreachable Redis exits 1 with a clear message, without hanging', async () => {
    const file = writeJson(dir, 'ok.json', base);
    const run = await runCli(['crawl', file], { env: { ...env, REDIS_URL: 'redis://user:secret@127.0.0.1:1' }, timeoutMs: 30_000 });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('cannot reach Redis at redis://***:***@127.0.0.1:1');
    expect(run.stderr).not.toContain('secret');
    // Without hanging: it exits 1 (a hang is killed at 30 s, no exit code) after one attempt, with no
    // start-up retry (a worker's REDIS_STARTUP_TIMEOUT_MS wait would log each one). The old bound,
    // under 20 s of this process's clock, timed a cold Node start on a loaded machine as well.
    expect(run.stderr).not.toContain('redis not reachable yet, retrying');
    expect(run.stderr).not.toContain('within REDIS_STARTUP_TIMEOUT_MS');
    const status = await runCli(['status'], { env: { ...env, REDIS_URL: 'redis://127.0.0.1:1' }, timeoutMs: 30_000 });
    expect(status.code).toBe(1);
  });

  test('a poison job lands in the dead-letter set with its reason, and the worker goes on', async () => {
    const site = await startCatalogueSite(siteShape(40, 20));
    const keys = new Keys(prefix);
    const redis = new Redis(REDIS_URL);
    const fetchQueue = new Queue('fetch', { connection: redis, prefix: keys.queuePrefix('fetch') });
    const parseQueue = new Queue('parse', { connection: redis, prefix: keys.queuePrefix('parse') });
    const workers = [spawnCli(['worker', 'fetcher'], { env }), spawnCli(['worker', 'parser'], { env }), spawnCli(['worker', 'writer'], { env })];
    try {
      const file = writeJson(dir, 'small.json', catalogueSpider(site.url));
      const out = `${dir}/poison-items.jsonl`;
      const seeded = await runCli(['seed', file, '--crawl-id', 'poison', '--sink', out], { env });
      expect(seeded.code).toBe(0);
      // Poison: a fetch job with a bad URL and depth, a parse job whose body is not gzip, a job with no crawl.
      await fetchQueue.add('fetch', { crawlId: 'poison', url: 'not a url', depth: -1 }, { jobId: 'fbad1' });
      // pending first, as the fleet does: a parser that took the job before would find it not pending and drop it
      await redis.sadd(keys.part('poison', 0, 1).pending.parse, 'pbad2');
      await parseQueue.add(
        'parse',
        { crawlId: 'poison', url: `${site.url}/x`, finalUrl: `${site.url}/x`, depth: 0, status: 200, contentType: 'text/html', fetchedAt: new Date().toISOString(), body: 'not gzip' },
        { jobId: 'pbad2' },
      );
      await fetchQueue.add('fetch', { hello: 'world' }, { jobId: 'fbad3' });
      const waited = await runCli(['wait', '--crawl-id', 'poison', '--timeout', '60'], { env });
      expect(waited.code).toBe(0);

      const dead = await getDeadLetters(redis, keys, 'poison');
      expect(dead.fbad1).toMatchObject({ stage: 'fetch', code: 'ERR_INVALID_JOB', reason: expect.stringMatching(/^invalid fetch job: url: .*; depth: /) });
      expect(dead.pbad2).toMatchObject({ stage: 'parse', reason: expect.stringMatching(/header|gzip|incorrect/i) });
      // BullMQ's failed set holds every dead letter too, with its reason (what Bull Board shows), and
      // the job with no crawl, which only it can hold.
      const failed = Object.fromEntries((await fetchQueue.getFailed()).map((j) => [j.id, j.failedReason]));
      const brokenLink = Object.keys(dead).find((id) => id.startsWith('f') && id !== 'fbad1')!;
      expect(failed).toEqual({
        fbad1: expect.stringMatching(/^invalid fetch job: url: /),
        fbad3: expect.stringMatching(/^invalid fetch job: crawlId: /),
        [brokenLink]: 'ERR_HTTP_STATUS: HTTP 404',
      });
      expect(Object.fromEntries((await parseQueue.getFailed()).map((j) => [j.id, j.failedReason]))).toEqual({ pbad2: expect.stringMatching(/header|gzip|incorrect/i) });

      // The workers are still up, and the real crawl finished around the poison.
      expect(workers.every((w) => w.exitCode === null)).toBe(true);
      const status = JSON.parse((await runCli(['status', '--crawl-id', 'poison', '--json'], { env })).stdout);
      expect(status.state).toBe('done');
      expect(status.counters.written).toBe(40 + 40);
      expect(status.counters.failed).toBe(1 + 2);
    } finally {
      for (const w of workers) w.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.result));
      await fetchQueue.close();
      await parseQueue.close();
      redis.disconnect();
      await site.close();
    }
  });
});

describe('a crawl registered by a fleet older than the partitioned frontier (issue #18, "Upgrading")', () => {
  const dir = tempDir('legacy');
  const prefix = uniquePrefix('legacy');
  const env = testEnv(prefix);
  const redis = new Redis(REDIS_URL);
  afterAll(async () => {
    redis.disconnect();
    await dropPrefix(prefix);
  });

  test('workers refuse to start beside it (exit 2, naming it); seeding it exits 2; status reads it; reset removes it, and then the workers start', async () => {
    // What the older fleet left: the crawl in one slot, its frontier a list, its meta without `parts`.
    const base = `${prefix}:crawl:{old-crawl}`;
    await redis.sadd(`${prefix}:crawls`, 'old-crawl');
    await redis.hset(`${base}:meta`, 'state', 'running', 'spiderName', 'old', 'startedAt', new Date().toISOString(), 'spider', JSON.stringify({ name: 'old', startUrls: ['http://127.0.0.1:9/'] }));
    await redis.hset(`${base}:counters`, 'seen', '12', 'fetched', '5');
    await redis.rpush(`${base}:frontier`, 'a'.repeat(32));
    for (const command of [
      ['worker', 'fetcher'],
      ['crawl', writeJson(dir, 'spider.json', catalogueSpider('http://127.0.0.1:9')), '--crawl-id', 'new-crawl'],
    ]) {
      const run = await runCli(command, { env, timeoutMs: 30_000 });
      expect(run.code).toBe(2);
      expect(run.stderr).toContain('older than the partitioned frontier are still unfinished: old-crawl');
    }
    const seeded = await runCli(['seed', writeJson(dir, 'old.json', catalogueSpider('http://127.0.0.1:9')), '--crawl-id', 'old-crawl'], { env });
    expect(seeded.code).toBe(2);
    expect(seeded.stderr).toContain('crawl old-crawl was registered by a crawlfleet older than its partitioned frontier');
    const status = JSON.parse((await runCli(['status', '--crawl-id', 'old-crawl', '--json'], { env })).stdout);
    expect(status).toMatchObject({ state: 'running', partitions: 0, counters: { seen: 12, fetched: 5 } });
    expect((await runCli(['reset', '--crawl-id', 'old-crawl'], { env })).code).toBe(0);
    expect(await redis.exists(`${base}:meta`, `${base}:counters`, `${base}:frontier`)).toBe(0);
    const worker = spawnCli(['worker', 'writer'], { env });
    let output = '';
    for (const stream of [worker.stdout!, worker.stderr!]) stream.on('data', (d: Buffer) => (output += d.toString()));
    try {
      // Past the check that refused it before: it says it is ready, and is still running.
      await waitFor(() => output.includes('worker ready') || worker.exitCode !== null, 60_000, 'the writer to be ready or to exit');
      expect(worker.exitCode).toBeNull();
      expect(output).toContain('worker ready');
    } finally {
      worker.kill('SIGTERM');
      expect((await worker.result).code).toBe(0);
    }
  });
});
