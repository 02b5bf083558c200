import { validateSpider } from '@crawlfleet/core';
import { isAddressAllowed, makeLookup, parseHostResolve } from '@crawlfleet/fetch';
import {
  healthFromHash,
  hostPolicy,
  isProxyFault,
  jitterFactor,
  nextThrottleDelay,
  orderProxies,
  parseProxyUrls,
  probeAddressPolicy,
  proxyScore,
  robotsRules,
  type ProxyHealth,
} from '@crawlfleet/politeness';

describe('host policy', () => {
  const spider = validateSpider({
    name: 'p',
    politeness: { concurrencyPerHost: 4, delayPerHost: 100 },
    hosts: { 'slow.test': { concurrencyPerHost: 1, delayPerHost: 2000, randomizeDelay: true } },
  });
  test("the spider's politeness, overridden per host by `hosts`", () => {
    expect(hostPolicy(spider, 'any.test')).toMatchObject({ concurrency: 4, delayMs: 100, randomize: false });
    expect(hostPolicy(spider, 'slow.test')).toMatchObject({ concurrency: 1, delayMs: 2000, randomize: true });
  });
  test('robots.txt Crawl-delay raises the delay and never lowers it', () => {
    expect(hostPolicy(spider, 'any.test', 3000).delayMs).toBe(3000);
    expect(hostPolicy(spider, 'slow.test', 500).delayMs).toBe(2000);
  });
  test('randomizeDelay waits 0.5 to 1.5 times the delay, as Scrapy does', () => {
    expect(jitterFactor(false, () => 0.9)).toBe(1);
    expect(jitterFactor(true, () => 0)).toBe(0.5);
    expect(jitterFactor(true, () => 0.999)).toBeCloseTo(1.499);
  });
});

describe("AutoThrottle (Scrapy's algorithm, shared through Redis)", () => {
  const policy = { delayMs: 100, autoThrottle: { enabled: true, targetConcurrency: 4, maxDelay: 5000 } };
  test('the delay moves halfway towards latency / target concurrency', () => {
    // target 2000 / 4 = 500; (100 + 500) / 2 = 300, but never below the target: 500
    expect(nextThrottleDelay(100, { latencyMs: 2000, status: 200, failed: false }, policy)).toBe(500);
    // a fast host: target 40 / 4 = 10; (1000 + 10) / 2 = 505
    expect(nextThrottleDelay(1000, { latencyMs: 40, status: 200, failed: false }, policy)).toBe(505);
  });
  test('bounded below by delayPerHost and above by maxDelay', () => {
    expect(nextThrottleDelay(100, { latencyMs: 1, status: 200, failed: false }, policy)).toBe(100);
    expect(nextThrottleDelay(4000, { latencyMs: 60_000, status: 200, failed: false }, policy)).toBe(5000);
  });
  test('an error page does not lower the delay; a failure or a 429/503 doubles it', () => {
    expect(nextThrottleDelay(1000, { latencyMs: 10, status: 404, failed: false }, policy)).toBe(1000);
    expect(nextThrottleDelay(1000, { latencyMs: 10, status: 503, failed: false }, policy)).toBe(2000);
    expect(nextThrottleDelay(100, { latencyMs: 30_000, failed: true }, policy)).toBe(250);
    expect(nextThrottleDelay(4000, { latencyMs: 10, status: 429, failed: false }, policy)).toBe(5000);
  });
});

describe('proxy list', () => {
  test('http and https proxies, with credentials; ids are stable and labels never show the password', () => {
    const [a, b] = parseProxyUrls(['http://alice:s3cret@127.0.0.1:8001', 'https://127.0.0.1:8443/'], 'PROXY_LIST');
    expect(a).toMatchObject({ url: 'http://alice:s3cret@127.0.0.1:8001', label: expect.not.stringContaining('s3cret') });
    expect(a!.id).toMatch(/^[0-9a-f]{12}$/);
    expect(parseProxyUrls(['http://alice:s3cret@127.0.0.1:8001'], 'x')[0]!.id).toBe(a!.id);
    expect(b).toMatchObject({ url: 'https://127.0.0.1:8443', label: 'https://127.0.0.1:8443' });
  });
  test('a duplicate counts once', () => {
    expect(parseProxyUrls(['http://127.0.0.1:1', 'http://127.0.0.1:1/'], 'x')).toHaveLength(1);
  });
  test('a bad entry is a configuration error naming the source and the entry, without its password', () => {
    expect(() => parseProxyUrls(['http://127.0.0.1:1', 'socks5://bob:pw@127.0.0.1:2'], 'proxies.txt')).toThrow(/proxies\.txt: proxy 2: must be http:\/\/ or https:\/\/, got socks5:/);
    expect(() => parseProxyUrls(['not a url'], 'PROXY_LIST')).toThrow(expect.objectContaining({ code: 'ERR_CONFIG', message: expect.stringMatching(/^PROXY_LIST: proxy 1: not a URL/) }));
  });
});

describe('proxy health and selection', () => {
  const now = 10_000_000;
  const proxy = (id: string, fields: Record<string, string>): ProxyHealth => healthFromHash(id, `http://127.0.0.1/${id}`, fields);
  test("the score weighs success rate 0.6, recency 0.2, speed 0.2 (the article's ProxyPool)", () => {
    expect(proxyScore(proxy('a', { ok: '98', fail: '0', lastOk: String(now), lat: '0' }), now)).toBeCloseTo(0.6 * (99 / 100) + 0.2 + 0.2);
    expect(proxyScore(proxy('a', { ok: '0', fail: '8', lastOk: String(now - 1_800_000), lat: '2500' }), now)).toBeCloseTo(0.6 * 0.1 + 0.2 * 0.5 + 0.2 * 0.5);
    // no history yet: an even chance on every part, so a new proxy gets tried
    expect(proxyScore(proxy('a', {}), now)).toBeCloseTo(0.5);
    expect(proxyScore(proxy('a', { banned: '1', ok: '100' }), now)).toBe(0);
  });
  const good = proxy('good', { ok: '500', fail: '0', lastOk: String(now), lat: '100' });
  const poor = proxy('poor', { ok: '5', fail: '95', lat: '4000' });
  const banned = proxy('banned', { ok: '100', banned: '1' });
  test('weighted: drawn in proportion to score; banned proxies never', () => {
    let seed = 1;
    const random = () => {
      seed = (seed * 16807) % 2147483647;
      return seed / 2147483647;
    };
    const firsts = { good: 0, poor: 0 } as Record<string, number>;
    for (let i = 0; i < 2000; i++) {
      const order = orderProxies('weighted', [good, poor, banned], { now, random });
      expect(order.map((p) => p.id).sort()).toEqual(['good', 'poor']);
      firsts[order[0]!.id]!++;
    }
    expect(firsts.good! / 2000).toBeGreaterThan(0.75);
    expect(firsts.poor).toBeGreaterThan(0);
  });
  test('round_robin: least recently used first; random: a shuffle', () => {
    const a = proxy('a', { used: '300' });
    const b = proxy('b', { used: '100' });
    const c = proxy('c', {});
    expect(orderProxies('round_robin', [a, b, c], { now }).map((p) => p.id)).toEqual(['c', 'b', 'a']);
    const seq = [0.9, 0.1, 0.5];
    expect(orderProxies('random', [a, b, c], { now, random: () => seq.shift()! }).map((p) => p.id)).toEqual(['b', 'c', 'a']);
  });
  test('proxies the URL was blocked through are left out, unless that leaves none', () => {
    expect(orderProxies('round_robin', [good, poor], { now, avoid: ['good'] }).map((p) => p.id)).toEqual(['poor']);
    expect(orderProxies('round_robin', [good, poor], { now, avoid: ['good', 'poor'] })).toHaveLength(2);
    expect(orderProxies('weighted', [banned], { now })).toEqual([]);
  });
  test("the proxies holding one of the host's sessions go first, in the strategy's order, even past the first 8; the rest follow", () => {
    const many = Array.from({ length: 12 }, (_, i) => proxy(`p${String(i).padStart(2, '0')}`, { used: String(i) }));
    const prefer = new Set(['p10', 'p03']);
    expect(orderProxies('round_robin', many, { now, prefer }).map((p) => p.id)).toEqual(['p03', 'p10', 'p00', 'p01', 'p02', 'p04', 'p05', 'p06']);
    // a preferred proxy the URL was blocked through, or a banned one, is still left out
    expect(orderProxies('round_robin', [good, poor, banned], { now, prefer: new Set(['banned', 'good']), avoid: ['good'] }).map((p) => p.id)).toEqual(['poor']);
  });
  test('a proxy fault is an error of the proxy itself, not of the site behind it', () => {
    expect(isProxyFault(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8001'), { code: 'ECONNREFUSED' }))).toBe(true);
    expect(isProxyFault({ message: 'wrapped', cause: new Error('Bad response: 407') })).toBe(true);
    expect(isProxyFault(new Error('Proxy timeout'))).toBe(true);
    expect(isProxyFault(new Error('Bad response: 502'))).toBe(false);
    expect(isProxyFault(Object.assign(new Error('Timeout awaiting response'), { code: 'ETIMEDOUT' }))).toBe(false);
  });
});

describe('robots.txt rules (RFC 9309)', () => {
  const origin = 'http://shop.test';
  const body = [
    'User-agent: *',
    'Disallow: /private/',
    'Allow: /private/open.html',
    'Crawl-delay: 1.5',
    '',
    'User-agent: crawlfleet',
    'Disallow: /no-fleet/',
    'Sitemap: http://shop.test/sitemap.xml',
  ].join('\n');
  test('a 2xx is parsed: the crawlfleet group when there is one, its Crawl-delay and sitemaps', () => {
    const rules = robotsRules(origin, { status: 200, body })!;
    expect(rules.isAllowed(`${origin}/no-fleet/a.html`)).toBe(false);
    // the crawlfleet group replaces the * group for us
    expect(rules.isAllowed(`${origin}/private/a.html`)).toBe(true);
    expect(rules.sitemaps).toEqual(['http://shop.test/sitemap.xml']);
    const star = robotsRules(origin, { status: 200, body: body.split('\n\n')[0]! })!;
    expect(star.isAllowed(`${origin}/private/a.html`)).toBe(false);
    expect(star.isAllowed(`${origin}/private/open.html`)).toBe(true);
    expect(star.crawlDelayMs).toBe(1500);
  });
  test('a 4xx means no rules; a 5xx or an unreachable server means unknown (do not crawl yet)', () => {
    expect(robotsRules(origin, { status: 404, body: 'Disallow: /' })!.isAllowed(`${origin}/x`)).toBe(true);
    expect(robotsRules(origin, { status: 503, body: '' })).toBeUndefined();
    expect(robotsRules(origin, { unavailable: 'ECONNREFUSED' })).toBeUndefined();
  });
});

describe('HOST_RESOLVE', () => {
  test('name:address pairs, like curl --resolve', () => {
    expect([...parseHostResolve('shop-1.test:127.0.0.1, Shop-2.test:[::1]')]).toEqual([
      ['shop-1.test', '127.0.0.1'],
      ['shop-2.test', '::1'],
    ]);
    expect(() => parseHostResolve('shop.test:nowhere')).toThrow(/HOST_RESOLVE/);
  });
  test('an overridden name still passes the SSRF guard unless private addresses are allowed', async () => {
    const overrides = parseHostResolve('shop.test:127.0.0.1');
    const resolve = (allowPrivate: boolean) =>
      new Promise<string>((resolvePromise, reject) => makeLookup(overrides, allowPrivate)!('shop.test', {}, (err, address) => (err ? reject(err) : resolvePromise(address as string))));
    await expect(resolve(true)).resolves.toBe('127.0.0.1');
    await expect(resolve(false)).rejects.toMatchObject({ code: 'ERR_FORBIDDEN_ADDRESS' });
  });
});

describe('the proxy probe: the SSRF guard on PROXY_PROBE_URL', () => {
  test('a name may resolve to public addresses only; an IP address written in the URL is taken as it is', () => {
    const byName = probeAddressPolicy('http://probe.example:8080/health');
    expect(byName).toEqual({ allowPrivate: false, allowed: [] });
    expect(['93.184.215.14', '127.0.0.1', '10.0.0.1', '169.254.169.254'].map((a) => isAddressAllowed(a, byName))).toEqual([true, false, false, false]);
    const literal = probeAddressPolicy('http://10.0.0.7:8080/health');
    expect(['10.0.0.7', '10.0.0.8', '127.0.0.1'].map((a) => isAddressAllowed(a, literal))).toEqual([true, false, false]);
    expect(probeAddressPolicy('https://[fd00::7]/')).toEqual({ allowPrivate: false, allowed: ['fd00::7'] });
  });
});
