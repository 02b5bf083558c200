// The fleet's sessions in a real Redis (SessionStore, issue #30): two stores stand for two fetchers.
import { Redis } from 'ioredis';
import { Keys } from '@crawlfleet/core';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fetchPage } from '@crawlfleet/fetch';
import { MAX_COOKIES_PER_SESSION, SessionStore, sessionsFromHash } from '@crawlfleet/politeness';
import { REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/cli.js';

const limits = { maxPerHost: 3, maxAgeMs: 60_000, maxUses: 5 };
const SCOPE = 'crawl-1';
const at = (host: string) => ({ host, scope: SCOPE });
const profile = (userAgent: string) => () => ({ userAgent, headers: { 'user-agent': userAgent, accept: 'text/html' } });

describe('sessions in Redis, shared by the fleet', () => {
  let redis: Redis;
  let other: Redis;
  let prefix: string;
  let keys: Keys;
  beforeEach(() => {
    redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    other = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    prefix = uniquePrefix('sessions');
    keys = new Keys(prefix);
  });
  afterEach(async () => {
    await dropPrefix(prefix);
    redis.disconnect();
    other.disconnect();
  });

  test("two fetchers on one host share a proxy's session and its cookies", async () => {
    const first = new SessionStore(redis, keys, limits);
    const second = new SessionStore(other, keys, limits);
    const a = await first.take(at('shop.test'), 'p1', profile('chrome-linux'));
    const b = await second.take(at('shop.test'), 'p1', profile('firefox-linux'));
    expect(b.session).toMatchObject({ id: a.session.id, proxy: 'p1', profile: 'chrome-linux', uses: 2 });

    await first.storeCookies(a.session, 'https://shop.test/cart', ['sid=abc123; Path=/; Secure; HttpOnly', 'theme=dark; Path=/cart', 'tracker=1; Domain=other.test']);
    expect(await second.cookieHeader(b.session, 'https://shop.test/cart/items')).toBe('theme=dark; sid=abc123'); // RFC 6265: the longer path first
    expect(await second.cookieHeader(b.session, 'https://shop.test/')).toBe('sid=abc123');
    // Secure: not over plain http; a cookie for another domain was refused
    expect(await second.cookieHeader(b.session, 'http://shop.test/')).toBe('');
    // a server deleting a cookie deletes it for every fetcher
    await second.storeCookies(b.session, 'https://shop.test/', ['sid=; Path=/; Max-Age=0']);
    expect(await first.cookieHeader(a.session, 'https://shop.test/cart')).toBe('theme=dark');

    // another proxy gets a session of its own, without the cookies
    const c = await second.take(at('shop.test'), 'p2', profile('firefox-linux'));
    expect(c.session.id).not.toBe(a.session.id);
    expect(c.session.profile).toBe('firefox-linux');
    expect(await second.cookieHeader(c.session, 'https://shop.test/cart')).toBe('');
  });

  test('a block retires exactly that session and its cookies; the next request begins another', async () => {
    const store = new SessionStore(redis, keys, limits);
    const blocked = (await store.take(at('shop.test'), 'p1', profile('chrome-linux'))).session;
    const kept = (await store.take(at('shop.test'), 'p2', profile('chrome-linux'))).session;
    await store.storeCookies(blocked, 'https://shop.test/', ['sid=blocked; Path=/']);
    await store.storeCookies(kept, 'https://shop.test/', ['sid=kept; Path=/']);

    expect(await store.retire(blocked)).toBe(true);
    expect(await store.retire(blocked)).toBe(false);
    expect(await redis.exists(keys.polite().sessionCookies('shop.test', SCOPE, blocked.id))).toBe(0);
    expect(await store.cookieHeader(kept, 'https://shop.test/')).toBe('sid=kept');
    const { sessions } = sessionsFromHash(await redis.hgetall(keys.polite().sessions('shop.test', SCOPE)));
    expect(sessions.map((s) => s.id)).toEqual([kept.id]);

    const next = (await store.take(at('shop.test'), 'p1', profile('chrome-linux'))).session;
    expect(next.id).not.toBe(blocked.id);
    expect(await store.cookieHeader(next, 'https://shop.test/')).toBe('');
  });

  test('many fetchers at once keep the bounds: one session per proxy, at most maxUses uses each, at most maxPerHost alive', async () => {
    const stores = [new SessionStore(redis, keys, limits), new SessionStore(other, keys, limits)];
    const proxies = ['p1', 'p2', 'p3', 'p4'];
    const takes = await Promise.all(Array.from({ length: 60 }, (_, i) => stores[i % 2]!.take(at('shop.test'), proxies[i % 4]!, profile('chrome-linux'))));
    const { sessions } = sessionsFromHash(await redis.hgetall(keys.polite().sessions('shop.test', SCOPE)));
    expect(sessions.length).toBeLessThanOrEqual(limits.maxPerHost);
    expect(new Set(sessions.map((s) => s.proxy)).size).toBe(sessions.length);
    for (const session of sessions) expect(session.uses).toBeLessThanOrEqual(limits.maxUses);
    // every take was counted by the session it took: 60 uses in all, among alive and retired sessions
    const usesById = new Map<string, number>();
    for (const { session } of takes) usesById.set(session.id, Math.max(usesById.get(session.id) ?? 0, session.uses));
    expect([...usesById.values()].reduce((a, b) => a + b, 0)).toBe(60);
    for (const uses of usesById.values()) expect(uses).toBeLessThanOrEqual(limits.maxUses);
    const retired = takes.flatMap((t) => t.retired);
    expect(new Set(retired.map((r) => r.id)).size).toBe(retired.length);
    expect(usesById.size).toBe(sessions.length + retired.length);
  });

  test('a new host taken through 40 proxies by 4 fetchers at once gives every request a session, one per proxy', async () => {
    const connections = [redis, other, redis.duplicate(), other.duplicate()];
    try {
      const stores = connections.map((c) => new SessionStore(c, keys, { ...limits, maxPerHost: 50 }));
      const takes = await Promise.all(Array.from({ length: 40 }, (_, i) => stores[i % 4]!.take(at('crowded.test'), `p${i}`, profile('chrome-linux'))));
      expect(new Set(takes.map((t) => t.session.proxy)).size).toBe(40);
      const { sessions } = sessionsFromHash(await redis.hgetall(keys.polite().sessions('crowded.test', SCOPE)));
      expect(sessions).toHaveLength(40);
    } finally {
      connections[2]!.disconnect();
      connections[3]!.disconnect();
    }
  });

  test("a response over http changes no Secure cookie; a retired session's late response stores nothing", async () => {
    const store = new SessionStore(redis, keys, limits);
    const { session } = await store.take(at('shop.test'), 'p1', profile('chrome-linux'));
    await store.storeCookies(session, 'https://shop.test/', ['sid=good; Path=/; Secure']);
    await store.storeCookies(session, 'http://shop.test/', ['sid=evil; Path=/', 'theme=dark; Path=/']);
    await store.storeCookies(session, 'http://shop.test/', ['sid=; Path=/; Secure; Max-Age=0']);
    // both on one path, set within one millisecond: their order in the header is not defined
    expect((await store.cookieHeader(session, 'https://shop.test/')).split('; ').sort()).toEqual(['sid=good', 'theme=dark']);

    expect(await store.retire(session)).toBe(true);
    expect(await store.storeCookies(session, 'https://shop.test/', ['late=1; Path=/'])).toBe(false);
    expect(await redis.exists(keys.polite().sessionCookies('shop.test', SCOPE, session.id))).toBe(0);
    // a retire after the host's hash expired leaves no key behind
    await redis.del(keys.polite().sessions('shop.test', SCOPE));
    expect(await store.retire(session)).toBe(false);
    expect(await redis.exists(keys.polite().sessions('shop.test', SCOPE))).toBe(0);
  });

  test('a hostile site cannot grow a session without bound: cookies over 4 KB are refused, at most 180 kept', async () => {
    const store = new SessionStore(redis, keys, limits);
    const { session } = await store.take(at('greedy.test'), 'p1', profile('chrome-linux'));
    const many = Array.from({ length: 250 }, (_, i) => `c${i}=${i}; Path=/`);
    await store.storeCookies(session, 'https://greedy.test/', [...many, `huge=${'x'.repeat(5000)}; Path=/`]);
    const key = keys.polite().sessionCookies('greedy.test', SCOPE, session.id);
    expect(await redis.hlen(key)).toBe(MAX_COOKIES_PER_SESSION);
    expect(await redis.hexists(key, 'greedy.test;/;huge')).toBe(0);
    // a known cookie still updates at the cap
    await store.storeCookies(session, 'https://greedy.test/', ['c0=updated; Path=/']);
    expect(await store.cookieHeader(session, 'https://greedy.test/')).toContain('c0=updated');
    expect(await redis.pttl(key)).toBeGreaterThan(0);
  });

  test("the fleet's sessions alive: each begun counts, each retired (block, room, uses) does not; a take says whether it began one", async () => {
    const store = new SessionStore(redis, keys, limits);
    const tight = { maxPerHost: 1, maxAgeMs: 60_000, maxUses: 2 };
    const a = await store.take(at('a.test'), 'p1', profile('chrome-linux'));
    const again = await store.take(at('a.test'), 'p1', profile('chrome-linux'));
    const b = await store.take(at('b.test'), '', profile('chrome-linux'), tight);
    expect([a.began, again.began, b.began]).toEqual([true, false, true]);
    expect(b.session.ttlMs).toBe(120_000);
    expect(await store.alive()).toBe(2);
    // the spider's own limits: one session per host, so another proxy's makes room
    const c = await store.take(at('b.test'), 'p9', profile('chrome-linux'), tight);
    expect(c.retired).toEqual([{ id: b.session.id, reason: 'room' }]);
    expect(await store.alive()).toBe(2);
    await store.take(at('b.test'), 'p9', profile('chrome-linux'), tight);
    const d = await store.take(at('b.test'), 'p9', profile('chrome-linux'), tight);
    expect(d.retired).toEqual([{ id: c.session.id, reason: 'uses' }]);
    expect(await store.retire(a.session)).toBe(true);
    expect(await store.alive()).toBe(1);
    // one past its age leaves the count without a take
    await redis.zadd(keys.polite().sessionsAlive('old.test'), Date.now() - 1, `${SCOPE} old.test x`);
    expect(await store.alive()).toBe(1);
  });

  test("a crawl's sessions are its own: another crawl on the host begins its own, with its own profile, limits and cookies", async () => {
    const store = new SessionStore(redis, keys, limits);
    const mine = (await store.take(at('shop.test'), 'p1', profile('AcmeBot/1.0'))).session;
    await store.storeCookies(mine, 'https://shop.test/', ['login=token; Path=/']);
    const theirs = await store.take({ host: 'shop.test', scope: 'crawl-2' }, 'p1', profile('Mozilla/5.0 Chrome/150'), { maxPerHost: 1, maxAgeMs: 1000, maxUses: 1 });
    expect(theirs).toMatchObject({ began: true, retired: [], session: { profile: 'Mozilla/5.0 Chrome/150' } });
    expect(theirs.session.id).not.toBe(mine.id);
    expect(await store.cookieHeader(theirs.session, 'https://shop.test/')).toBe('');
    // the other crawl's tighter limits retired nothing of this one's
    expect((await store.take(at('shop.test'), 'p1', profile('AcmeBot/1.0'))).session).toMatchObject({ id: mine.id, uses: 2, profile: 'AcmeBot/1.0' });
    expect(await store.cookieHeader(mine, 'https://shop.test/')).toBe('login=token');
  });

  test('a session keeps the whole header set it began with, for every fetcher', async () => {
    const first = new SessionStore(redis, keys, limits);
    const second = new SessionStore(other, keys, limits);
    const headers = { 'user-agent': 'Mozilla/5.0 Chrome/150', 'sec-ch-ua': '"Chromium";v="150"', accept: 'text/html' };
    const a = await first.take(at('shop.test'), 'p1', () => ({ userAgent: headers['user-agent'], headers }));
    const b = await second.take(at('shop.test'), 'p1', profile('Mozilla/5.0 Firefox/140'));
    expect(b.session).toMatchObject({ id: a.session.id, profile: headers['user-agent'], headers });
  });

  test('cookies a header cannot carry, or with attributes past what browsers keep, are refused; expired ones leave Redis when read', async () => {
    const store = new SessionStore(redis, keys, limits);
    const { session } = await store.take(at('shop.test'), 'p1', profile('chrome-linux'));
    await store.storeCookies(session, 'https://shop.test/', [
      'u=\u00e9\u20ac; Path=/',
      'line=a\u0007b; Path=/',
      `deep=1; Path=/${'p'.repeat(1100)}`,
      `ext=1; Path=/; ${Array.from({ length: 50 }, (_, i) => `x${i}=${'y'.repeat(20)}`).join('; ')}`,
      'soon=1; Path=/; Max-Age=1',
      'ok=1; Path=/',
    ]);
    const key = keys.polite().sessionCookies('shop.test', SCOPE, session.id);
    expect((await redis.hkeys(key)).sort()).toEqual(['shop.test;/;ext', 'shop.test;/;ok', 'shop.test;/;soon']);
    // unknown attributes are not kept
    expect((await redis.hget(key, 'shop.test;/;ext'))!.length).toBeLessThan(300);
    const soon = JSON.parse((await redis.hget(key, 'shop.test;/;soon'))!);
    await redis.hset(key, 'shop.test;/;soon', JSON.stringify({ ...soon, expires: new Date(Date.now() - 1000).toISOString(), maxAge: null }));
    expect((await store.cookieHeader(session, 'https://shop.test/')).split('; ').sort()).toEqual(['ext=1', 'ok=1']);
    expect(await redis.hexists(key, 'shop.test;/;soon')).toBe(0);
  });

  test("a request's cookie jar: the session's cookies for each URL, a request hook's after them; each Set-Cookie kept for the fleet", async () => {
    const store = new SessionStore(redis, keys, limits);
    const { session } = await store.take(at('shop.test'), 'p1', profile('chrome-linux'));
    const jar = store.jar(session, { cookie: 'hook=1', origin: 'https://shop.test' });
    expect(await jar.getCookieString('https://shop.test/')).toBe('hook=1');
    await jar.setCookie('sid=abc; Path=/', 'https://shop.test/login');
    await jar.setCookie('theme=dark; Path=/', 'https://shop.test/login');
    // two cookies of one path set within a millisecond: their order is not defined; the hook's go last
    const sorted = (header: string) => [...header.split('; ').slice(0, -1).sort(), header.split('; ').at(-1)];
    expect(sorted(await jar.getCookieString('https://shop.test/cart'))).toEqual(['sid=abc', 'theme=dark', 'hook=1']);
    // the hook's cookie of a name takes the place of the session's; it goes to its own origin only
    expect(await store.jar(session, { cookie: 'sid=mine', origin: 'https://shop.test' }).getCookieString('https://shop.test/')).toBe('theme=dark; sid=mine');
    expect((await store.jar(session, { cookie: 'hook=1', origin: 'https://other.test' }).getCookieString('https://shop.test/')).split('; ').sort()).toEqual(['sid=abc', 'theme=dark']);
    expect(await store.cookiesFor(session, 'https://shop.test/')).toEqual({ sid: 'abc', theme: 'dark' });
  });

  test("through got's redirects, each hop sends what the session holds then: a cookie a redirect deleted does not go on", async () => {
    const seen: Array<{ path: string; cookie: string | undefined }> = [];
    const hops: Record<string, { status: number; headers: Record<string, string> }> = {
      '/login': { status: 302, headers: { 'set-cookie': 'sid=secret; Path=/', location: '/logout' } },
      '/logout': { status: 302, headers: { 'set-cookie': 'sid=; Path=/; Max-Age=0', location: '/home' } },
      '/home': { status: 200, headers: { 'content-type': 'text/html' } },
    };
    const server = createServer((req, res) => {
      seen.push({ path: req.url ?? '', cookie: (req.headers as IncomingHttpHeaders).cookie });
      const hop = hops[req.url ?? ''] ?? { status: 404, headers: {} };
      res.writeHead(hop.status, hop.headers).end('<html><body>ok</body></html>');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const store = new SessionStore(redis, keys, limits);
      const { session } = await store.take(at('127.0.0.1'), '', profile('chrome-linux'));
      const page = await fetchPage(
        `${origin}/login`,
        { allowPrivateAddresses: true, limits: { maxResponseBytes: 100_000, timeoutMs: 5000, maxRedirects: 5 } },
        { userAgent: 'chrome-linux', cookieJar: store.jar(session) },
      );
      expect(page).toMatchObject({ status: 200, redirects: 2 });
      expect(seen).toEqual([
        { path: '/login', cookie: undefined },
        { path: '/logout', cookie: 'sid=secret' },
        { path: '/home', cookie: undefined },
      ]);
      expect(await store.cookieHeader(session, `${origin}/`)).toBe('');
    } finally {
      server.close();
    }
  });

  test('limits that are not whole numbers of at least 1 are refused', () => {
    expect(() => new SessionStore(redis, keys, { ...limits, maxPerHost: 0 })).toThrow('sessions.maxPerHost must be a whole number of at least 1, not 0');
    expect(() => new SessionStore(redis, keys, { ...limits, maxUses: 1.5 })).toThrow('sessions.maxUses');
  });
});
