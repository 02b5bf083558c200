import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { MongoClient } from 'mongodb';
import { Keys } from '@crawlfleet/core';
import { getDeadLetters } from '@crawlfleet/crawl';
import { politeSpider, startPoliteSite } from '../fixtures/polite-site.mjs';
import { startAuthProxy, type AuthProxy } from '../helpers/auth-proxy.js';
import { startServer } from '../fixtures/http-server.mjs';
import { REDIS_URL, dropPrefix, readJsonl, resultWithin, runCli, spawnCli, tempDir, testEnv, uniquePrefix, writeJson, type CliResult } from '../helpers/cli.js';
import { startMongo, type MongoServer } from '../helpers/mongo.js';
import { freePort, waitForPort } from '../helpers/ports.js';

// Every password holds `@`, `:` and `/`, the characters that cut a URL where a parser would not.
const REDIS_PW = 'Kx9redis@Qz:sl/ash';
const MONGO_PW = 'Kx9mongo@Wv:sl/ash';
const PROXY_PW = 'Kx9proxy@Yt:sl/ash';

/** What must never be seen: each password, raw and URL-encoded, and each piece of it around its `@` (a leaked tail). */
const FORBIDDEN = [REDIS_PW, MONGO_PW, PROXY_PW].flatMap((pw) => [pw, ...pw.split('@')].flatMap((s) => [s, encodeURIComponent(s)])).filter((s, i, all) => all.indexOf(s) === i);

function leaks(where: string, text: string): string[] {
  return FORBIDDEN.filter((secret) => text.includes(secret)).map((secret) => `${where}: ${JSON.stringify(secret)}`);
}

/** A private Redis that wants a password, so the URL must carry one. */
async function startPrivateRedis(password: string): Promise<{ port: number; stop: () => Promise<void> }> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction', '--requirepass', password],
    { stdio: 'ignore' },
  );
  process.once('exit', () => child.kill('SIGKILL'));
  await waitForPort(port, 10_000, 'redis-server');
  return {
    port,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Every key of the database and its value, read by type (DUMP compresses, so it is read as well). */
async function dumpRedis(redis: Redis, match = '*', skip?: RegExp): Promise<string> {
  const parts: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', match, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      if (skip?.test(key)) continue;
      const type = await redis.type(key);
      const value =
        type === 'string'
          ? await redis.get(key)
          : type === 'hash'
            ? await redis.hgetall(key)
            : type === 'set'
              ? await redis.smembers(key)
              : type === 'zset'
                ? await redis.zrange(key, 0, -1, 'WITHSCORES')
                : type === 'list'
                  ? await redis.lrange(key, 0, -1)
                  : type === 'stream'
                    ? await redis.xrange(key, '-', '+')
                    : null;
      const dumped = await redis.dumpBuffer(key);
      parts.push(`${key} ${type} ${JSON.stringify(value)} ${dumped?.toString('latin1') ?? ''}`);
    }
  } while (cursor !== '0');
  parts.push(String(await redis.call('CLIENT', 'LIST')));
  return parts.join('\n');
}

describe('credentials with @, : and / never leave the process that was given them', () => {
  const prefix = uniquePrefix('redact');
  const dir = tempDir('redact');
  let redisServer: { port: number; stop: () => Promise<void> };
  let mongo: MongoServer;
  let proxy: AuthProxy;
  let site: Awaited<ReturnType<typeof startPoliteSite>>;
  let redis: Redis;
  /** every piece of text the fleet showed or stored, by where it came from */
  const seen: { where: string; text: string }[] = [];
  const record = (where: string, r: CliResult) => seen.push({ where: `${where} stdout`, text: r.stdout }, { where: `${where} stderr`, text: r.stderr });

  const urls = {
    redisRaw: '',
    redisEncoded: '',
    mongoRaw: '',
    mongoEncoded: '',
    proxyRaw: '',
    proxyEncoded: '',
  };

  beforeAll(async () => {
    redisServer = await startPrivateRedis(REDIS_PW);
    // FerretDB of our own (its PLAIN mechanism takes any password): the point is where the string goes.
    const configured = process.env.MONGO_URL;
    delete process.env.MONGO_URL;
    mongo = await startMongo(`cf_redact_${process.pid}`).finally(() => {
      if (configured !== undefined) process.env.MONGO_URL = configured;
    });
    proxy = await startAuthProxy('alice', PROXY_PW);
    // /p/3.html is missing: a dead letter whose record and failed job are read too.
    site = await startPoliteSite({
      pages: 8,
      behave: (_req, res, { path }) => {
        if (path !== '/p/3.html') return false;
        res.writeHead(404).end('gone');
        return true;
      },
    });
    const mongoHostDb = mongo.url.replace('mongodb://', '');
    urls.redisRaw = `redis://:${REDIS_PW}@127.0.0.1:${redisServer.port}`;
    urls.redisEncoded = `redis://:${encodeURIComponent(REDIS_PW)}@127.0.0.1:${redisServer.port}`;
    urls.mongoRaw = `mongodb://crawler:${MONGO_PW}@${mongoHostDb}?authMechanism=PLAIN`;
    urls.mongoEncoded = `mongodb://crawler:${encodeURIComponent(MONGO_PW)}@${mongoHostDb}?authMechanism=PLAIN`;
    urls.proxyRaw = `http://alice:${PROXY_PW}@127.0.0.1:${proxy.port}`;
    urls.proxyEncoded = `http://alice:${encodeURIComponent(PROXY_PW)}@127.0.0.1:${proxy.port}`;
    redis = new Redis(urls.redisEncoded);
  });
  afterAll(async () => {
    redis?.disconnect();
    await site?.close();
    await proxy?.close();
    const client = await MongoClient.connect(mongo.url).catch(() => undefined);
    await client
      ?.db()
      .dropDatabase()
      .catch(() => undefined);
    await client?.close();
    await mongo?.stop();
    await redisServer?.stop();
  });

  test('a crawl in one process (--redis, --mongo, --proxies raw) and one by separate workers (encoded): done through the proxy, no password in any output or any Redis key', async () => {
    const spider = (name: string) => writeJson(dir, `${name}.json`, politeSpider(name, ['127.0.0.1'], site.port));
    // The user's own environment may point elsewhere; these processes get only what this test gives.
    const env = testEnv(prefix, { LOG_LEVEL: 'debug', MONGO_URL: 'mongodb://127.0.0.1:1/unused', REDIS_URL: 'redis://127.0.0.1:1' });

    // 1. one process, every URL pasted raw
    const proxiesFile = join(dir, 'proxies.txt');
    writeFileSync(proxiesFile, `${urls.proxyRaw}\n`);
    const one = await runCli(['crawl', spider('one'), '--crawl-id', 'one', '--redis', urls.redisRaw, '--mongo', urls.mongoRaw, '--proxies', proxiesFile, '--json', '--quiet'], {
      env,
      timeoutMs: 150_000,
    });
    record('crawl', one);
    expect({ code: one.code, stderrTail: one.code === 0 ? '' : one.stderr.slice(-3000) }).toEqual({ code: 0, stderrTail: '' });
    expect(JSON.parse(one.stdout.trim().split('\n').at(-1)!).counters).toMatchObject({ fetched: 9, items: 7, written: 7, failed: 1 });

    // 2. separate processes: the seeder and workers with encoded URLs, the fetchers' proxy raw in PROXY_LIST
    const fleetEnv = { ...env, REDIS_URL: urls.redisEncoded, MONGO_URL: urls.mongoEncoded, PROXY_LIST: urls.proxyRaw };
    const seeded = await runCli(['seed', spider('two'), '--crawl-id', 'two', '--sink', 'mongo'], { env: fleetEnv });
    record('seed', seeded);
    expect(seeded.code).toBe(0);
    const workers = {
      fetcher: spawnCli(['worker', 'fetcher'], { env: fleetEnv }),
      parser: spawnCli(['worker', 'parser'], { env: { ...fleetEnv, REDIS_URL: urls.redisRaw } }),
      writer: spawnCli(['worker', 'writer'], { env: { ...fleetEnv, MONGO_URL: urls.mongoRaw } }),
    };
    const waited = await runCli(['wait', '--crawl-id', 'two', '--timeout', '120'], { env: fleetEnv, timeoutMs: 130_000 });
    record('wait', waited);
    for (const w of Object.values(workers)) w.kill('SIGTERM');
    for (const [name, w] of Object.entries(workers)) record(`worker ${name}`, await resultWithin(w, 30_000, `worker ${name}`));
    expect(waited.code).toBe(0);

    // Both crawls went through the proxy, which let nobody in without the password.
    expect(proxy.refused).toBe(0);
    // (a tunnel is kept alive for many requests: at least one per fetching process)
    expect(proxy.tunnels.length).toBeGreaterThanOrEqual(2);
    // The items are in MongoDB, written by writers that took the password from their own environment.
    const client = await MongoClient.connect(mongo.url);
    try {
      expect(
        await client
          .db()
          .collection('page')
          .countDocuments({ crawlId: { $in: ['one', 'two'] } }),
      ).toBe(7);
    } finally {
      await client.close();
    }

    // 3. everything a user or another program can read
    for (const args of [
      ['status', '--json'],
      ['status', '--crawl-id', 'one', '--json'],
      ['status', '--crawl-id', 'two'],
      ['monitor', '--once'],
    ]) {
      const r = await runCli(args, { env: fleetEnv });
      expect(r.code).toBe(0);
      record(args.join(' '), r);
    }
    const dashboardPort = await freePort();
    const dashboard = spawnCli(['dashboard', '--port', String(dashboardPort)], { env: { ...fleetEnv, REDIS_URL: urls.redisRaw } });
    await waitForPort(dashboardPort, 30_000, 'dashboard');
    for (const path of ['/api/crawls', '/metrics', '/api/queues?activeQueue=fetch&status=failed']) {
      const res = await fetch(`http://127.0.0.1:${dashboardPort}${path}`);
      seen.push({ where: `dashboard ${path}`, text: await res.text() });
    }
    dashboard.kill('SIGTERM');
    record('dashboard', await resultWithin(dashboard, 30_000, 'dashboard'));

    // The stored sink says where the items went and that it needs credentials, and nothing more.
    const keys = new Keys(prefix);
    expect(JSON.parse((await redis.hget(keys.crawl('one').meta, 'sink'))!)).toEqual({ kind: 'mongo', url: `${mongo.url}?authMechanism=PLAIN`, needsCredentials: true });
    expect([Object.keys(await getDeadLetters(redis, keys, 'one')).length, Object.keys(await getDeadLetters(redis, keys, 'two')).length]).toEqual([1, 1]);
    seen.push({ where: 'redis', text: await dumpRedis(redis) });

    expect(seen.flatMap(({ where, text }) => leaks(where, text))).toEqual([]);
    // The check can see: the URLs the processes were given are in their environment, in this form.
    expect(leaks('the raw Redis URL itself', urls.redisRaw)).not.toEqual([]);
  });

  test('a password or token in the query (redis://h/0?password=…, ?access_token=…) is hidden as well: error lines, and a Redis that wants the password', async () => {
    const QUERY_PW = 'Kx9query-pw-in-url';
    const TOKEN = 'Kx9token-in-query';
    const closedPort = await freePort();
    const env = testEnv(prefix, { REDIS_URL: 'redis://127.0.0.1:1' });
    const unreachable = await runCli(['status', '--redis', `redis://127.0.0.1:${closedPort}/0?password=${QUERY_PW}`], { env });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain(`crawlfleet: cannot reach Redis at redis://127.0.0.1:${closedPort}/0?password=***: `);
    // ioredis takes the password from the query: the right one works, a wrong one is refused
    const right = await runCli(['status', '--json', '--redis', `redis://127.0.0.1:${redisServer.port}/0?password=${encodeURIComponent(REDIS_PW)}`], { env: { ...env, LOG_LEVEL: 'debug' } });
    expect(right.code).toBe(0);
    const wrong = await runCli(['status', '--redis', `redis://127.0.0.1:${redisServer.port}/0?db=0&password=${QUERY_PW}`], { env });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain(`cannot reach Redis at redis://127.0.0.1:${redisServer.port}/0?db=0&password=***: WRONGPASS`);
    const sitemap = await runCli(['seed', writeJson(dir, 'smq.json', politeSpider('smq', ['127.0.0.1'], site.port)), '--sitemap', `http://127.0.0.1:${closedPort}/sitemap.xml?access_token=${TOKEN}`], {
      env: { ...env, REDIS_URL: urls.redisEncoded },
    });
    expect(sitemap.code).not.toBe(0);
    const all = [unreachable, right, wrong, sitemap].map((r) => r.stdout + r.stderr);
    expect(all.filter((text) => text.includes(QUERY_PW) || text.includes(TOKEN) || leaks('', text).length > 0)).toEqual([]);
  });

  test("the CLI's error line shows a failed URL without its password", async () => {
    const closedPort = await freePort();
    const env = testEnv(prefix, { REDIS_URL: 'redis://127.0.0.1:1' });
    const unreachable = await runCli(['status', '--redis', `redis://:${REDIS_PW}@127.0.0.1:${closedPort}`], { env });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain(`crawlfleet: cannot reach Redis at redis://***:***@127.0.0.1:${closedPort}: `);
    const encoded = await runCli(['status', '--redis', `redis://:${encodeURIComponent(REDIS_PW)}@127.0.0.1:${closedPort}`], { env });
    expect(encoded.code).toBe(1);
    expect(encoded.stderr).toContain(`crawlfleet: cannot reach Redis at redis://***:***@127.0.0.1:${closedPort}: `);
    // a wrong password on a server that wants one
    const wrong = await runCli(['status', '--redis', `redis://:wrong@Qz:sl/ash@127.0.0.1:${redisServer.port}`], { env });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain(`cannot reach Redis at redis://***:***@127.0.0.1:${redisServer.port}: WRONGPASS`);
    // a sitemap that cannot be read, its URL with a password: the seed's own error line
    const sitemap = await runCli(['seed', writeJson(dir, 'sm.json', politeSpider('sm', ['127.0.0.1'], site.port)), '--sitemap', `http://u:${PROXY_PW}@127.0.0.1:${closedPort}/sitemap.xml`], {
      env: { ...env, REDIS_URL: urls.redisEncoded },
    });
    expect(sitemap.code).not.toBe(0);
    expect(sitemap.stderr).toMatch(/^crawlfleet: /m);
    // commander's own complaint about an argument echoes it
    const usage = await runCli(['crawl', 'x.json', '--concurrency', `redis://:${REDIS_PW}@h`], { env });
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('redis://***:***@h');
    const all = [unreachable, encoded, wrong, sitemap, usage];
    expect(all.flatMap((r, i) => leaks(`run ${i}`, r.stdout + r.stderr))).toEqual([]);
    expect(all.flatMap((r, i) => (/cannot reach Redis at redis:\/\/\*\*\*:\*\*\*@127\.0\.0\.1|^crawlfleet: |redis:\/\/\*\*\*:\*\*\*@h/m.test(r.stderr) ? [] : [`run ${i}: ${r.stderr}`]))).toEqual([]);
  });
});

describe("a code spider's parse jobs carry no Set-Cookie or other credential header (Bull Board shows them)", () => {
  const COOKIE = 'Kx9cookie-session-secret';
  const TOKEN = 'Kx9response-token-secret';
  const prefix = uniquePrefix('headers');
  const dir = tempDir('headers');
  afterAll(() => dropPrefix(prefix));

  test('the parse hook reads the other headers; the failed parse job in Bull Board and every Redis key hold neither secret', async () => {
    const site = await startServer((req, res) => {
      const headers = { 'content-type': 'text/html', 'set-cookie': [`sid=${COOKIE}; HttpOnly`, 'theme=dark'], 'x-auth-token': TOKEN, 'x-record-source': 'cookie-site' };
      if (req.url === '/') return void res.writeHead(200, headers).end(`<html><body>${[1, 2, 3, 4].map((n) => `<a href="/p/${n}.html">${n}</a>`).join('')}</body></html>`);
      const m = /^\/p\/(\d)\.html$/.exec(req.url ?? '');
      if (m) return void res.writeHead(200, headers).end(`<html><body><h1>page ${m[1]}</h1></body></html>`);
      res.writeHead(404).end();
    });
    const spider = join(dir, 'cookies.ts');
    writeFileSync(
      spider,
      `import { defineSpider } from '@crawlfleet/sdk';
export default defineSpider({
  name: 'cookies',
  startUrls: ['${site.url}/'],
  allowPrivateAddresses: true,
  obeyRobotsTxt: false,
  follow: [{ css: 'a' }],
  itemKeys: { page: 'n' },
  parse(page) {
    const m = /\\/p\\/(\\d)\\.html$/.exec(page.url);
    if (!m) return;
    if (m[1] === '3') throw new Error('page 3 fails on purpose');
    return { items: [{ type: 'page', n: Number(m[1]), source: page.headers['x-record-source'], headerNames: Object.keys(page.headers).sort().join(' ') }] };
  },
});
`,
    );
    const env = testEnv(prefix);
    try {
      const out = join(dir, 'items.jsonl');
      const run = await runCli(['crawl', spider, '--crawl-id', 'cookies', '--out', out, '--json', '--quiet'], { env, cwd: dir });
      expect({ code: run.code, stderr: run.code === 0 ? '' : run.stderr.slice(-2000) }).toEqual({ code: 0, stderr: '' });
      // The hook still reads the response's other headers.
      const items = readJsonl(out).sort((a, b) => Number(a.n) - Number(b.n));
      expect(items.map((i) => [i.n, i.source])).toEqual([
        [1, 'cookie-site'],
        [2, 'cookie-site'],
        [4, 'cookie-site'],
      ]);
      for (const i of items) expect(String(i.headerNames).split(' ')).toEqual(expect.arrayContaining(['content-type', 'x-record-source']));

      // What Bull Board shows of the failed parse job (read-only mode shows it too), and all of Redis.
      const port = await freePort();
      const dashboard = spawnCli(['dashboard', '--port', String(port), '--read-only'], { env });
      let shown = '';
      try {
        await waitForPort(port, 30_000, 'dashboard');
        shown = await (await fetch(`http://127.0.0.1:${port}/api/queues?activeQueue=parse&status=failed`)).text();
      } finally {
        dashboard.kill('SIGTERM');
        await resultWithin(dashboard, 30_000, 'dashboard');
      }
      expect(shown).toContain('x-record-source');
      expect(shown).toContain('/p/3.html');
      const redis = new Redis(REDIS_URL);
      let stored = '';
      let sessionCookies = '';
      try {
        // The session's cookie jar is where the fleet keeps a site's cookies, on purpose (its next
        // requests send them: docs/spider-format.md, sessions); nowhere else may hold them.
        const jar = /:session:cookies:[^:]+:[^:]+:cookies$/;
        stored = await dumpRedis(redis, `${prefix}:*`, jar);
        sessionCookies = await dumpRedis(redis, `${prefix}:*:session:cookies:*:cookies`);
      } finally {
        redis.disconnect();
      }
      expect(stored).toContain('/p/3.html');
      expect(sessionCookies).toContain(COOKIE);
      expect({ shown: [COOKIE, TOKEN].filter((s) => shown.includes(s)), stored: [COOKIE, TOKEN].filter((s) => stored.includes(s)) }).toEqual({ shown: [], stored: [] });
      // ...and the hook no longer sees them (docs/spider-format.md says which headers it gets).
      expect(items.filter((i) => /set-cookie|x-auth-token/.test(String(i.headerNames)))).toEqual([]);
    } finally {
      await site.close();
    }
  });
});
