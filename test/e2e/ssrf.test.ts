import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { Redis } from 'ioredis';
import { startServer } from '../fixtures/http-server.mjs';
import { REDIS_URL, dropPrefix, readJsonl, resultWithin, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson, deadLetters } from '../helpers/cli.js';
import { crawlStatus } from '../helpers/status.js';
import { startTinyproxy, type Tinyproxy } from '../helpers/tinyproxy.js';

/**
 * Names that HOST_RESOLVE maps to addresses the SSRF guard must refuse. Nothing here ever connects
 * to them: the guard refuses before any socket opens, and the proxy, as a safety net, may connect to
 * 127.0.0.1 only (tinyproxy's Filter).
 */
const FORBIDDEN = [
  { name: 'loopback.test', address: '127.0.0.2', kind: 'loopback' },
  { name: 'loopback6.test', address: '::1', kind: 'IPv6 loopback' },
  { name: 'ten.test', address: '10.0.0.1', kind: 'private 10/8' },
  { name: 'seventeen.test', address: '172.16.0.1', kind: 'private 172.16/12' },
  { name: 'nineteen.test', address: '192.168.1.1', kind: 'private 192.168/16' },
  { name: 'linklocal.test', address: '169.254.1.1', kind: 'link-local' },
  { name: 'metadata.test', address: '169.254.169.254', kind: 'cloud metadata' },
  { name: 'mapped.test', address: '::ffff:169.254.169.254', kind: 'IPv4-mapped metadata' },
  { name: 'ula.test', address: 'fd00::1', kind: 'IPv6 unique local' },
  { name: 'linklocal6.test', address: 'fe80::1', kind: 'IPv6 link-local' },
];
/** The test site, allowed by the spider's `allowedAddresses: ["127.0.0.1"]` and by nothing else. */
const ALLOWED = 'allowed.test';
/** One more allowed origin per forbidden name, whose robots.txt redirects there: a hop followed inside one request. */
const hop = (name: string) => `hop-${name}`;

const HOST_RESOLVE = [...FORBIDDEN.map((f) => `${f.name}:${f.address.includes(':') ? `[${f.address}]` : f.address}`), `${ALLOWED}:127.0.0.1`, ...FORBIDDEN.map((f) => `${hop(f.name)}:127.0.0.1`)].join(
  ',',
);

describe('SSRF: names resolving to loopback, private, link-local and metadata addresses are refused directly, after a redirect and through a proxy', () => {
  // A prefix per crawl: robots.txt is cached fleet-wide, and each crawl must ask for its own.
  const prefixes = { direct: uniquePrefix('ssrf-direct'), proxied: uniquePrefix('ssrf-proxied') };
  const dir = tempDir('ssrf');
  const redis = new Redis(REDIS_URL);
  let site: Awaited<ReturnType<typeof startServer>>;
  let proxy: Tinyproxy;

  beforeAll(async () => {
    site = await startServer((req, res) => {
      const host = String(req.headers.host ?? '').replace(/:\d+$/, '');
      const path = req.url ?? '/';
      const port = site.port;
      if (host === ALLOWED) {
        if (path === '/') {
          const links = FORBIDDEN.map((f) => `<a href="/redirect/${f.name}">${f.kind}</a>`).join('');
          return void res.writeHead(200, { 'content-type': 'text/html' }).end(`<html><head><title>allowed index</title></head><body>${links}</body></html>`);
        }
        const to = FORBIDDEN.find((f) => path === `/redirect/${f.name}`);
        if (to) return void res.writeHead(302, { location: `http://${to.name}:${port}/via-redirect` }).end();
        return void res.writeHead(404).end();
      }
      const from = FORBIDDEN.find((f) => host === hop(f.name));
      if (from && path === '/robots.txt') return void res.writeHead(302, { location: `http://${from.name}:${port}/robots.txt` }).end();
      res.writeHead(404).end();
    });
    proxy = await startTinyproxy({ onlyHosts: ['127.0.0.1'] });
  });
  afterAll(async () => {
    await site.close();
    await proxy.kill();
    redis.disconnect();
    for (const prefix of Object.values(prefixes)) await dropPrefix(prefix);
  });

  const crawl = async (crawlId: keyof typeof prefixes, extraStartUrls: string[], args: string[] = []) => {
    const port = site.port;
    const spider = writeJson(dir, `${crawlId}.json`, {
      name: 'ssrf',
      startUrls: [`http://${ALLOWED}:${port}/`, ...FORBIDDEN.map((f) => `http://${f.name}:${port}/direct`), ...FORBIDDEN.map((f) => `http://${hop(f.name)}:${port}/page`), ...extraStartUrls],
      allowedDomains: [ALLOWED, ...FORBIDDEN.map((f) => f.name), ...FORBIDDEN.map((f) => hop(f.name))],
      allowedAddresses: ['127.0.0.1'],
      obeyRobotsTxt: true,
      follow: [{ css: 'a' }],
      items: [{ type: 'page', fields: { title: { css: 'title', required: true } } }],
    });
    const out = join(dir, `${crawlId}.jsonl`);
    const run = await runCli(['crawl', spider, '--crawl-id', crawlId, '--out', out, '--json', '--quiet', ...args], { env: testEnv(prefixes[crawlId], { HOST_RESOLVE }), timeoutMs: 120_000 });
    expect(run.code).toBe(0);
    const dead = await deadLetters(redis, prefixes[crawlId], crawlId);
    return { items: existsSync(out) ? readJsonl(out) : [], dead, status: JSON.parse(run.stdout.trim().split('\n').pop()!) };
  };

  /** What the dead letters must be: each URL once, refused by the guard on its first attempt. */
  const refused = (urls: string[]) => Object.fromEntries(urls.map((u) => [u, { code: 'ERR_FORBIDDEN_ADDRESS', attempts: 1 }]));
  const deadByUrl = (dead: { url: string; code: string; attempts: number }[]) => Object.fromEntries(dead.map((d) => [d.url, { code: d.code, attempts: d.attempts }]));

  test('(1) directly, (2) through a redirect from an allowed site, and (2b) a redirect hop inside one request (robots.txt): each refused, and only the allowed site is ever asked', async () => {
    const port = site.port;
    const before = site.requests.length;
    const { items, dead, status } = await crawl('direct', []);
    expect(items.map((i) => i.title)).toEqual(['allowed index']);
    expect(deadByUrl(dead)).toEqual(
      refused([
        ...FORBIDDEN.map((f) => `http://${f.name}:${port}/direct`),
        ...FORBIDDEN.map((f) => `http://${f.name}:${port}/via-redirect`),
        ...FORBIDDEN.map((f) => `http://${hop(f.name)}:${port}/page`),
      ]),
    );
    expect(dead).toHaveLength(3 * FORBIDDEN.length);
    // Each refusal names the address it refused.
    for (const f of FORBIDDEN) expect(dead.find((d) => d.url === `http://${f.name}:${port}/direct`)!.reason).toContain(`resolves to ${f.address}`);
    expect(status.counters).toMatchObject({ failed: 3 * FORBIDDEN.length, items: 1 });
    const asked = site.requests
      .slice(before)
      .map((r) => `${r.host} ${r.path}`)
      .sort();
    expect(asked).toEqual([`${ALLOWED} /`, `${ALLOWED} /robots.txt`, ...FORBIDDEN.map((f) => `${ALLOWED} /redirect/${f.name}`), ...FORBIDDEN.map((f) => `${hop(f.name)} /robots.txt`)].sort());
    expect(proxy.requests()).toEqual([]);
  });

  test('(3) through a proxy, http and https, and the redirects through it: each refused before the proxy hears of it; its log shows CONNECT to the vetted 127.0.0.1 only, never a name', async () => {
    const port = site.port;
    const before = site.requests.length;
    const proxies = join(dir, 'proxies.txt');
    writeFileSync(proxies, `${proxy.url}\n`);
    const { items, dead, status } = await crawl(
      'proxied',
      FORBIDDEN.map((f) => `https://${f.name}:${port}/direct-tls`),
      ['--proxies', proxies],
    );
    // The proxy's log: every request it got was a tunnel to the vetted address of the allowed names.
    const seen = proxy.requests();
    expect(new Set(seen.map((r) => `${r.method} ${r.target}`))).toEqual(new Set([`CONNECT 127.0.0.1:${port}`]));
    const log = readFileSync(proxy.logFile, 'utf8');
    for (const f of FORBIDDEN) {
      expect(log).not.toContain(f.name);
      expect(log).not.toContain(f.address.includes(':') ? `[${f.address}]` : `${f.address}:`);
    }
    expect(log).not.toContain('.test');
    expect(log).not.toContain('refused on filtered domain');
    expect(items.map((i) => i.title)).toEqual(['allowed index']);
    expect(deadByUrl(dead)).toEqual(
      refused([
        ...FORBIDDEN.map((f) => `http://${f.name}:${port}/direct`),
        ...FORBIDDEN.map((f) => `https://${f.name}:${port}/direct-tls`),
        ...FORBIDDEN.map((f) => `http://${f.name}:${port}/via-redirect`),
        ...FORBIDDEN.map((f) => `http://${hop(f.name)}:${port}/page`),
      ]),
    );
    expect(dead).toHaveLength(4 * FORBIDDEN.length);
    expect(status.counters).toMatchObject({ failed: 4 * FORBIDDEN.length, items: 1 });
    const asked = site.requests.slice(before);
    expect(asked.map((r) => `${r.host} ${r.path}`).sort()).toEqual(
      [`${ALLOWED} /`, `${ALLOWED} /robots.txt`, ...FORBIDDEN.map((f) => `${ALLOWED} /redirect/${f.name}`), ...FORBIDDEN.map((f) => `${hop(f.name)} /robots.txt`)].sort(),
    );
    process.stderr.write(`ssrf: ${dead.length} URLs refused through the proxy, ${seen.length} CONNECTs to 127.0.0.1:${port}, none to a name\n`);
  });
});

describe('the vetted address through a proxy: names resolve here, the proxy tunnels to the IP, Host and SNI keep the name', () => {
  const prefix = uniquePrefix('vetted');
  const dir = tempDir('vetted');
  const PASSWORD = 'vetted-proxy-pw';

  test('an https site through a proxy that wants credentials, and an http one: exact items, CONNECT to 127.0.0.1 in the log, the name only in Host and SNI', async () => {
    const key = join(dir, 'key.pem');
    const cert = join(dir, 'cert.pem');
    // The certificate names secure.test only: it verifies only when SNI and the check use the name.
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=secure.test', '-addext', 'subjectAltName=DNS:secure.test'], {
      stdio: 'ignore',
    });
    const seenTls: { host: string | undefined; servername: string | false | null | undefined }[] = [];
    const secure = createHttpsServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
      seenTls.push({ host: req.headers.host, servername: (req.socket as TLSSocket).servername });
      res.writeHead(200, { 'content-type': 'text/html' });
      if (req.url === '/') res.end('<html><body><a href="/a.html">a</a><a href="/b.html">b</a></body></html>');
      else res.end(`<html><body><h1 class="t">secure ${req.url}</h1></body></html>`);
    });
    await new Promise<void>((r) => secure.listen(0, '127.0.0.1', r));
    const securePort = (secure.address() as { port: number }).port;
    const plain = await startServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      if (req.url === '/') res.end('<html><body><a href="/c.html">c</a></body></html>');
      else res.end(`<html><body><h1 class="t">plain ${req.url}</h1></body></html>`);
    });
    const proxy = await startTinyproxy({ auth: { user: 'alice', password: PASSWORD }, onlyHosts: ['127.0.0.1'] });
    try {
      const proxies = join(dir, 'proxies.txt');
      writeFileSync(proxies, `${proxy.url}\n`);
      const env = testEnv(prefix, { NODE_EXTRA_CA_CERTS: cert, HOST_RESOLVE: 'secure.test:127.0.0.1,plain.test:127.0.0.1' });
      const run = async (crawlId: string, spider: object) => {
        const out = join(dir, `${crawlId}.jsonl`);
        const result = await runCli(['crawl', writeJson(dir, `${crawlId}.json`, spider), '--crawl-id', crawlId, '--proxies', proxies, '--out', out, '--json', '--quiet'], { env });
        expect(result.stdout + result.stderr).not.toContain(PASSWORD);
        expect(result.code).toBe(0);
        return {
          titles: readJsonl(out)
            .map((i) => i.title)
            .sort(),
          status: JSON.parse(result.stdout.trim().split('\n').pop()!),
        };
      };
      const items = [{ type: 'page', fields: { title: { css: 'h1.t', required: true } } }];
      const https = await run('secure', { name: 'secure', startUrls: [`https://secure.test:${securePort}/`], allowPrivateAddresses: true, obeyRobotsTxt: false, follow: [{ css: 'a' }], items });
      expect(https.titles).toEqual(['secure /a.html', 'secure /b.html']);
      expect(https.status.counters).toMatchObject({ fetched: 3, failed: 0 });
      expect(seenTls).toHaveLength(3);
      expect(seenTls.every((s) => s.host === `secure.test:${securePort}` && s.servername === 'secure.test')).toBe(true);

      // The http site is allowed by its address alone (allowedAddresses), not allowPrivateAddresses.
      const http = await run('plain', { name: 'plain', startUrls: [`http://plain.test:${plain.port}/`], allowedAddresses: ['127.0.0.1'], obeyRobotsTxt: false, follow: [{ css: 'a' }], items });
      expect(http.titles).toEqual(['plain /c.html']);
      expect(http.status.counters).toMatchObject({ fetched: 2, failed: 0 });
      expect(plain.requests.map((r) => `${r.host} ${r.path}`)).toEqual(['plain.test /', 'plain.test /c.html']);

      const targets = new Set(proxy.requests().map((r) => `${r.method} ${r.target}`));
      expect(targets).toEqual(new Set([`CONNECT 127.0.0.1:${securePort}`, `CONNECT 127.0.0.1:${plain.port}`]));
      expect(readFileSync(proxy.logFile, 'utf8')).not.toContain('.test');
    } finally {
      secure.close();
      await plain.close();
      await proxy.kill();
      await dropPrefix(prefix);
    }
  });

  test('proxies.resolveNames: the proxy is sent the name and resolves it itself (outside the guard, as documented)', async () => {
    const site = await startServer((_req, res) => void res.writeHead(200, { 'content-type': 'text/html' }).end('<html><body><h1 class="t">by name</h1></body></html>'));
    // tinyproxy resolves "localhost" itself; it may connect to that name only.
    const proxy = await startTinyproxy({ onlyHosts: ['localhost'] });
    try {
      const out = join(dir, 'names.jsonl');
      const spider = writeJson(dir, 'names.json', {
        name: 'names',
        startUrls: [`http://localhost:${site.port}/`],
        allowPrivateAddresses: true,
        obeyRobotsTxt: false,
        proxies: { resolveNames: true },
        items: [{ type: 'page', fields: { title: { css: 'h1.t', required: true } } }],
      });
      const run = await runCli(['crawl', spider, '--crawl-id', 'names', '--out', out, '--json', '--quiet'], { env: testEnv(prefix, { PROXY_LIST: proxy.url }) });
      expect(run.code).toBe(0);
      expect(readJsonl(out).map((i) => i.title)).toEqual(['by name']);
      expect(proxy.requests()).toEqual([{ method: 'CONNECT', target: `localhost:${site.port}` }]);
    } finally {
      await site.close();
      await proxy.kill();
      await dropPrefix(prefix);
    }
  });
});

describe('the proxy probe: a crawled page cannot choose where it goes', () => {
  const prefix = uniquePrefix('probe');
  const dir = tempDir('probe');
  let internal: Awaited<ReturnType<typeof startServer>>;
  let probeTarget: Awaited<ReturnType<typeof startServer>>;
  let proxy: Tinyproxy;

  beforeAll(async () => {
    // An internal service on loopback: nothing of the fleet may ever reach it.
    internal = await startServer((_req, res) => void res.writeHead(200, { 'content-type': 'text/plain' }).end('internal secrets'));
    // The operator's probe URL, on an address the operator wrote down.
    probeTarget = await startServer((_req, res) => void res.writeHead(204).end());
    proxy = await startTinyproxy();
  });
  afterAll(async () => {
    await internal.close();
    await probeTarget.close();
    await proxy.kill();
    await dropPrefix(prefix);
  });

  const env = (extra: Record<string, string> = {}) => testEnv(prefix, { PROXY_LIST: proxy.url, LOG_LEVEL: 'debug', ...extra });
  // undefined until a fetcher of the fleet has registered the proxy (one just started may not have yet)
  const proxyState = async (crawlId: string): Promise<string | undefined> => (await crawlStatus(env(), crawlId)).proxies[0]?.state;
  /** what the internal service and the proxy saw since `mark()` */
  let marks = { internal: 0, tunnels: 0 };
  const mark = () => (marks = { internal: internal.requests.length, tunnels: proxy.connects().length });
  const sinceMark = () => ({
    internal: internal.requests.slice(marks.internal).map((r) => `${r.host} ${r.path}`),
    tunnels: proxy
      .connects()
      .slice(marks.tunnels)
      .map((c) => c.target),
  });

  /**
   * A crawl gets the proxy banned on purpose: its page's name (evil.test) resolves to 127.0.0.9, an
   * address its spider allows, and the proxy is down, so its one failure bans it. Then the proxy
   * comes back, and the name now resolves to 127.0.0.1 (DNS rebinding), where the internal service
   * listens on the same port as the page's URL.
   */
  async function banThroughCrawl(crawlId: string): Promise<void> {
    await proxy.kill();
    const fetcher = spawnCli(['worker', 'fetcher'], { env: env({ HOST_RESOLVE: 'evil.test:127.0.0.9' }) });
    try {
      const spider = writeJson(dir, `${crawlId}.json`, {
        name: crawlId,
        startUrls: [`http://evil.test:${internal.port}/page.html`],
        allowedAddresses: ['127.0.0.9'],
        obeyRobotsTxt: false,
        proxies: { banAfterFailures: 1 },
      });
      const seeded = await runCli(['seed', spider, '--crawl-id', crawlId, '--sink', join(dir, `${crawlId}.jsonl`)], { env: env() });
      expect({ code: seeded.code, stderr: seeded.code === 0 ? '' : seeded.stderr.slice(-2000) }).toEqual({ code: 0, stderr: '' });
      await waitFor(async () => (await proxyState(crawlId)) === 'banned', 30_000, 'the proxy banned');
    } finally {
      fetcher.kill('SIGTERM');
      await resultWithin(fetcher, 30_000, 'the banning fetcher');
    }
    expect((await runCli(['cancel', '--crawl-id', crawlId], { env: env() })).code).toBe(0);
    await proxy.start();
    mark();
  }

  test('without PROXY_PROBE_URL the probe only checks the proxy itself: back in rotation, and the internal listener behind the rebound name sees nothing', async () => {
    await banThroughCrawl('rebind-default');
    const fetcher = spawnCli(['worker', 'fetcher'], { env: env({ HOST_RESOLVE: 'evil.test:127.0.0.1' }) });
    try {
      await waitFor(async () => sinceMark().internal.length > 0 || (await proxyState('rebind-default')) === 'ok', 30_000, 'a probe of the proxy');
      // a later probe round has no chance to reach the listener either
      await new Promise((r) => setTimeout(r, 1500));
    } finally {
      fetcher.kill('SIGTERM');
      await resultWithin(fetcher, 30_000, 'the probing fetcher');
    }
    expect({ ...sinceMark(), state: await proxyState('rebind-default') }).toEqual({
      internal: [],
      tunnels: [],
      state: 'ok',
    });
  });

  test('PROXY_PROBE_URL goes through the SSRF guard: a name that resolves to loopback is refused (the proxy stays banned); an address the operator wrote is probed', async () => {
    await banThroughCrawl('rebind-url');
    const refused = spawnCli(['worker', 'fetcher'], { env: env({ HOST_RESOLVE: 'evil.test:127.0.0.1,probe.test:127.0.0.1', PROXY_PROBE_URL: `http://probe.test:${internal.port}/health` }) });
    let log = '';
    let output = '';
    for (const stream of [refused.stdout!, refused.stderr!]) stream.on('data', (d: Buffer) => (output += d.toString()));
    try {
      // Until a probe was refused (the first comes FIRST_PROBE_AFTER_MS, 2 s, after the ban), not for
      // a fixed time: on a loaded machine the fetcher may not have probed yet when that is up.
      await waitFor(() => output.includes('ERR_FORBIDDEN_ADDRESS') || refused.exitCode !== null, 120_000, 'a refused probe');
    } finally {
      refused.kill('SIGTERM');
      log = (await resultWithin(refused, 30_000, 'the refused probe')).stderr;
    }
    expect({ ...sinceMark(), state: await proxyState('rebind-url') }).toEqual({
      internal: [],
      tunnels: [],
      state: 'banned',
    });
    expect(log).toContain('ERR_FORBIDDEN_ADDRESS');

    const probed = spawnCli(['worker', 'fetcher'], { env: env({ HOST_RESOLVE: 'evil.test:127.0.0.1', PROXY_PROBE_URL: `http://127.0.0.1:${probeTarget.port}/probe` }) });
    try {
      await waitFor(async () => (await proxyState('rebind-url')) === 'ok', 60_000, 'the proxy back after a probe of PROXY_PROBE_URL');
    } finally {
      probed.kill('SIGTERM');
      await resultWithin(probed, 30_000, 'the probing fetcher');
    }
    expect(probeTarget.requests.map((r) => r.path)).toEqual(['/probe']);
    expect(sinceMark()).toEqual({ internal: [], tunnels: [`127.0.0.1:${probeTarget.port}`] });
  });
});
