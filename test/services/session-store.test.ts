// The fleet's sessions in a real Redis (SessionStore, issue #30): two stores stand for two fetchers.
import { Redis } from 'ioredis';
import { Keys } from '@crawlfleet/core';
import { MAX_COOKIES_PER_SESSION, SessionStore, sessionsFromHash } from '@crawlfleet/politeness';
import { REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/cli.js';

const limits = { maxPerHost: 3, maxAgeMs: 60_000, maxUses: 5 };

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
    const a = await first.take('shop.test', 'p1', () => 'chrome-linux');
    const b = await second.take('shop.test', 'p1', () => 'firefox-linux');
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
    const c = await second.take('shop.test', 'p2', () => 'firefox-linux');
    expect(c.session.id).not.toBe(a.session.id);
    expect(c.session.profile).toBe('firefox-linux');
    expect(await second.cookieHeader(c.session, 'https://shop.test/cart')).toBe('');
  });

  test('a block retires exactly that session and its cookies; the next request begins another', async () => {
    const store = new SessionStore(redis, keys, limits);
    const blocked = (await store.take('shop.test', 'p1', () => 'chrome-linux')).session;
    const kept = (await store.take('shop.test', 'p2', () => 'chrome-linux')).session;
    await store.storeCookies(blocked, 'https://shop.test/', ['sid=blocked; Path=/']);
    await store.storeCookies(kept, 'https://shop.test/', ['sid=kept; Path=/']);

    expect(await store.retire(blocked)).toBe(true);
    expect(await store.retire(blocked)).toBe(false);
    expect(await redis.exists(keys.polite().sessionCookies('shop.test', blocked.id))).toBe(0);
    expect(await store.cookieHeader(kept, 'https://shop.test/')).toBe('sid=kept');
    const { sessions } = sessionsFromHash(await redis.hgetall(keys.polite().sessions('shop.test')));
    expect(sessions.map((s) => s.id)).toEqual([kept.id]);

    const next = (await store.take('shop.test', 'p1', () => 'chrome-linux')).session;
    expect(next.id).not.toBe(blocked.id);
    expect(await store.cookieHeader(next, 'https://shop.test/')).toBe('');
  });

  test('many fetchers at once keep the bounds: one session per proxy, at most maxUses uses each, at most maxPerHost alive', async () => {
    const stores = [new SessionStore(redis, keys, limits), new SessionStore(other, keys, limits)];
    const proxies = ['p1', 'p2', 'p3', 'p4'];
    const takes = await Promise.all(Array.from({ length: 60 }, (_, i) => stores[i % 2]!.take('shop.test', proxies[i % 4]!, () => 'chrome-linux')));
    const { sessions } = sessionsFromHash(await redis.hgetall(keys.polite().sessions('shop.test')));
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
      const takes = await Promise.all(Array.from({ length: 40 }, (_, i) => stores[i % 4]!.take('crowded.test', `p${i}`, () => 'chrome-linux')));
      expect(new Set(takes.map((t) => t.session.proxy)).size).toBe(40);
      const { sessions } = sessionsFromHash(await redis.hgetall(keys.polite().sessions('crowded.test')));
      expect(sessions).toHaveLength(40);
    } finally {
      connections[2]!.disconnect();
      connections[3]!.disconnect();
    }
  });

  test("a response over http changes no Secure cookie; a retired session's late response stores nothing", async () => {
    const store = new SessionStore(redis, keys, limits);
    const { session } = await store.take('shop.test', 'p1', () => 'chrome-linux');
    await store.storeCookies(session, 'https://shop.test/', ['sid=good; Path=/; Secure']);
    await store.storeCookies(session, 'http://shop.test/', ['sid=evil; Path=/', 'theme=dark; Path=/']);
    await store.storeCookies(session, 'http://shop.test/', ['sid=; Path=/; Secure; Max-Age=0']);
    // both on one path, set within one millisecond: their order in the header is not defined
    expect((await store.cookieHeader(session, 'https://shop.test/')).split('; ').sort()).toEqual(['sid=good', 'theme=dark']);

    expect(await store.retire(session)).toBe(true);
    expect(await store.storeCookies(session, 'https://shop.test/', ['late=1; Path=/'])).toBe(false);
    expect(await redis.exists(keys.polite().sessionCookies('shop.test', session.id))).toBe(0);
    // a retire after the host's hash expired leaves no key behind
    await redis.del(keys.polite().sessions('shop.test'));
    expect(await store.retire(session)).toBe(false);
    expect(await redis.exists(keys.polite().sessions('shop.test'))).toBe(0);
  });

  test('a hostile site cannot grow a session without bound: cookies over 4 KB are refused, at most 180 kept', async () => {
    const store = new SessionStore(redis, keys, limits);
    const { session } = await store.take('greedy.test', 'p1', () => 'chrome-linux');
    const many = Array.from({ length: 250 }, (_, i) => `c${i}=${i}; Path=/`);
    await store.storeCookies(session, 'https://greedy.test/', [...many, `huge=${'x'.repeat(5000)}; Path=/`]);
    const key = keys.polite().sessionCookies('greedy.test', session.id);
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
    const a = await store.take('a.test', 'p1', () => 'chrome-linux');
    const again = await store.take('a.test', 'p1', () => 'chrome-linux');
    const b = await store.take('b.test', '', () => 'chrome-linux', tight);
    expect([a.began, again.began, b.began]).toEqual([true, false, true]);
    expect(b.session.ttlMs).toBe(120_000);
    expect(await store.alive()).toBe(2);
    // the spider's own limits: one session per host, so another proxy's makes room
    const c = await store.take('b.test', 'p9', () => 'chrome-linux', tight);
    expect(c.retired).toEqual([{ id: b.session.id, reason: 'room' }]);
    expect(await store.alive()).toBe(2);
    await store.take('b.test', 'p9', () => 'chrome-linux', tight);
    const d = await store.take('b.test', 'p9', () => 'chrome-linux', tight);
    expect(d.retired).toEqual([{ id: c.session.id, reason: 'uses' }]);
    expect(await store.retire(a.session)).toBe(true);
    expect(await store.alive()).toBe(1);
    // one past its age leaves the count without a take
    await redis.zadd(keys.polite().sessionsAlive, Date.now() - 1, 'old.test x');
    expect(await store.alive()).toBe(1);
  });

  test("a request's cookie jar: the session's cookies for each URL, a request hook's after them; each Set-Cookie kept for the fleet", async () => {
    const store = new SessionStore(redis, keys, limits);
    const { session } = await store.take('shop.test', 'p1', () => 'chrome-linux');
    const jar = store.jar(session, 'hook=1');
    expect(await jar.getCookieString('https://shop.test/')).toBe('hook=1');
    await jar.setCookie('sid=abc; Path=/', 'https://shop.test/login');
    expect(await jar.getCookieString('https://shop.test/cart')).toBe('sid=abc; hook=1');
    expect(await store.jar(session).getCookieString('https://shop.test/')).toBe('sid=abc');
  });

  test('limits that are not whole numbers of at least 1 are refused', () => {
    expect(() => new SessionStore(redis, keys, { ...limits, maxPerHost: 0 })).toThrow('sessions.maxPerHost must be a whole number of at least 1, not 0');
    expect(() => new SessionStore(redis, keys, { ...limits, maxUses: 1.5 })).toThrow('sessions.maxUses');
  });
});
