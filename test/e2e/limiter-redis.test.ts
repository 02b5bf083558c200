import { Redis } from 'ioredis';
import { Keys, validateSpider } from '@crawlfleet/core';
import { Limiter, healthFromHash, hostPolicy, type AcquireInput } from '@crawlfleet/politeness';
import { REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/cli.js';

// The limiter's Lua against a real Redis, from many clients at once, as many fetchers would call it.
describe('the fleet-wide limiter (acquireHost, takeProxy, undoHost, releaseHost, proxyOutcome in Redis)', () => {
  const prefix = uniquePrefix('limiter');
  const keys = new Keys(prefix);
  const clients = Array.from({ length: 6 }, () => new Redis(REDIS_URL));
  const limiters = clients.map((c) => new Limiter(c, keys));
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await dropPrefix(prefix);
  });
  const spider = validateSpider({ name: 'l', politeness: { concurrencyPerHost: 3, delayPerHost: 0 } });
  const input = (host: string, leaseId: string, extra: Partial<AcquireInput> = {}): AcquireInput => ({
    host,
    leaseId,
    leaseMs: 10_000,
    policy: hostPolicy(spider, host),
    jitter: 1,
    deferrals: 0,
    proxies: [],
    ratePerProxy: 0,
    burstPerProxy: 1,
    maxHoldMs: 300_000,
    line: 'crawl-a',
    ...extra,
  });
  const released = { banAfterFailures: 3, probeAfterMs: 1000, maxHoldMs: 300_000 };
  // Redis's clock in whole milliseconds, as the limiter's Lua reads it (TIME, microseconds floored).
  const redisNow = async () => {
    const [seconds, micros] = await clients[0]!.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  };

  test('at most concurrencyPerHost leases at once, whatever the number of callers; a release frees one', async () => {
    const before = await redisNow();
    const grants = await Promise.all(Array.from({ length: 30 }, (_, i) => limiters[i % 6]!.acquire(input('conc.test', `job-${i}`))));
    const after = await redisNow();
    const granted = grants.map((g, i) => ({ g, i })).filter((x) => x.g.go);
    expect(granted).toHaveLength(3);
    // The 27 who must wait are told to come back spread out, not all at once: 27 places in the line,
    // at least 5 ms apart, 130 ms from the first to the last. Each wait counts from the moment Redis
    // ran that call, somewhere between `before` and `after` on Redis's clock, so the waits spread over
    // at least 130 ms less the time Redis took to run the 30 calls (after - before). That window is
    // read from Redis's clock, not assumed: on a loaded machine Redis can lose its core between two
    // of the calls (the old bound, 100 ms of spread, failed then). All due at once would leave a
    // spread of at most the window itself.
    const waits = grants.filter((g) => !g.go).map((g) => (g as { waitMs: number }).waitMs);
    expect(Math.max(...waits) - Math.min(...waits) + (after - before)).toBeGreaterThanOrEqual(130);
    expect(await limiters[0]!.acquire(input('conc.test', 'late'))).toMatchObject({ go: false, reason: 'concurrency' });
    await limiters[1]!.release({ host: 'conc.test', leaseId: `job-${granted[0]!.i}`, latencyMs: 100, ...released });
    expect(await limiters[2]!.acquire(input('conc.test', 'late'))).toMatchObject({ go: true });
  });

  test('delayPerHost: a second start comes no sooner than the delay (plus the margin), and the line behind it is spaced by the delay', async () => {
    const delayed = validateSpider({ name: 'd', politeness: { concurrencyPerHost: 100, delayPerHost: 300 } });
    const policy = hostPolicy(delayed, 'delay.test');
    const a = await limiters[0]!.acquire(input('delay.test', 'a', { policy }));
    expect(a).toMatchObject({ go: true });
    const startedA = (a as { startedAt: number }).startedAt;
    const b = await limiters[1]!.acquire(input('delay.test', 'b', { policy }));
    const betweenBC = await redisNow();
    const c = await limiters[2]!.acquire(input('delay.test', 'c', { policy }));
    const afterC = await redisNow();
    expect(b).toMatchObject({ go: false, reason: 'delay' });
    const [wb, wc] = [(b as { waitMs: number }).waitMs, (c as { waitMs: number }).waitMs];
    // Each wait counts from when Redis ran that call; b's ran between a's grant and `betweenBC`, c's
    // between `betweenBC` and `afterC`, all on Redis's clock. So b is due (its call's time + wb) 340 ms
    // after a's start (the 300 ms delay and hostSpacing.lua's margin, 40 ms), and c one more spacing
    // after b, whatever this machine's load put between the calls. No tolerance beyond Redis's own
    // clock: both sides are whole milliseconds of it. (The old bounds, wb > 300 and wc - wb >= 330,
    // took the time between the calls to be under 40 and 10 ms; a loaded machine broke that.)
    const dueB = { earliest: startedA + wb, latest: betweenBC + wb };
    const dueC = { earliest: betweenBC + wc, latest: afterC + wc };
    expect(dueB.earliest).toBeLessThanOrEqual(startedA + 340);
    expect(dueB.latest).toBeGreaterThanOrEqual(startedA + 340);
    expect(dueC.earliest).toBeLessThanOrEqual(startedA + 680);
    expect(dueC.latest).toBeGreaterThanOrEqual(startedA + 680);
    expect(wb).toBeLessThanOrEqual(340);
    // Coming back early does not help; on time does. "Early" on Redis's clock: a machine too loaded
    // to make this call within 340 ms of a's start makes it on time, and then it may go.
    const early = await limiters[1]!.acquire(input('delay.test', 'b', { policy, deferrals: 1 }));
    const afterEarly = await redisNow();
    if (afterEarly < startedA + 340) expect(early.go).toBe(false);
    else if (early.go) process.stderr.write('limiter: the early return came late on this loaded machine; not judged\n');
    await new Promise((r) => setTimeout(r, wb + 5));
    expect((await limiters[1]!.acquire(input('delay.test', 'b', { policy, deferrals: 1 }))).go).toBe(true);
  });

  test("each crawl waits in its own line: a crowd of 200 deferred jobs of one crawl (then cancelled) does not push another crawl's newcomer back", async () => {
    const delayed = validateSpider({ name: 'd', politeness: { concurrencyPerHost: 100, delayPerHost: 300 } });
    const policy = hostPolicy(delayed, 'lines.test');
    const first = await limiters[0]!.acquire(input('lines.test', 'a0', { policy, line: 'crowd' }));
    expect(first).toMatchObject({ go: true });
    let last = 0;
    for (let i = 1; i <= 200; i++) last = ((await limiters[i % 6]!.acquire(input('lines.test', `a${i}`, { policy, line: 'crowd' }))) as { waitMs: number }).waitMs;
    const afterCrowd = await redisNow();
    // The crowd's line reaches a minute ahead of the first start (200 places, 340 ms apart: 68 s),
    // counted on Redis's clock from the first start: the last wait counts from its own call, at the
    // latest `afterCrowd`, however long the 200 calls took on a loaded machine.
    expect(last + (afterCrowd - (first as { startedAt: number }).startedAt)).toBeGreaterThan(60_000);
    // ...while a newcomer of another crawl waits one delay, not behind the crowd.
    const other = await limiters[1]!.acquire(input('lines.test', 'b1', { policy, line: 'other' }));
    expect(other).toMatchObject({ go: false, reason: 'delay' });
    expect((other as { waitMs: number }).waitMs).toBeLessThanOrEqual(340);
  });

  test('Retry-After holds the host for every caller', async () => {
    expect((await limiters[0]!.acquire(input('hold.test', 'a'))).go).toBe(true);
    const before = performance.now();
    await limiters[0]!.release({ host: 'hold.test', leaseId: 'a', latencyMs: 5, holdMs: 1500, ...released });
    const held = await limiters[3]!.acquire(input('hold.test', 'b'));
    const elapsed = performance.now() - before;
    expect(held).toMatchObject({ go: false, reason: 'retry-after' });
    // The rest of the hold, by Redis's clock: 1,500 ms less what passed between the release and
    // this acquire (at most `elapsed`, whatever the machine's load; 5 ms for the clocks' rounding).
    expect((held as { waitMs: number }).waitMs).toBeGreaterThan(1500 - elapsed - 5);
    expect((held as { waitMs: number }).waitMs).toBeLessThanOrEqual(1500);
  });

  test('a hold never exceeds retry.maxRetryAfterMs: a 31-year Retry-After is brought down to the cap, and a caller with a smaller cap waits no longer than its own', async () => {
    expect((await limiters[0]!.acquire(input('cap.test', 'a'))).go).toBe(true);
    const beforeRelease = await redisNow();
    await limiters[0]!.release({ host: 'cap.test', leaseId: 'a', holdMs: 999_999_999_000, ...released, maxHoldMs: 2000 });
    const hold = Number(await clients[0]!.hget(keys.polite().host('cap.test'), 'hold'));
    const [seconds] = await clients[0]!.time();
    expect(hold - Number(seconds) * 1000).toBeLessThanOrEqual(3000);
    const held = await limiters[1]!.acquire(input('cap.test', 'b', { maxHoldMs: 2000 }));
    const afterAcquire = await redisNow();
    expect(held).toMatchObject({ go: false, reason: 'retry-after' });
    expect((held as { waitMs: number }).waitMs).toBeLessThanOrEqual(2000);
    // The rest of the 2,000 ms hold, less what passed on Redis's clock between the release and this
    // acquire (at most afterAcquire - beforeRelease, whatever the load; the old bound, 1,000 ms,
    // assumed under a second had passed).
    expect((held as { waitMs: number }).waitMs).toBeGreaterThan(2000 - (afterAcquire - beforeRelease) - 1);
    // A hold left by an older fleet without the cap (on a host with no line of waiting jobs yet):
    // a caller still waits at most its own cap.
    await clients[0]!.hset(keys.polite().host('stale.test'), 'hold', Date.now() + 999_999_999_000);
    const capped = await limiters[2]!.acquire(input('stale.test', 'c', { maxHoldMs: 500 }));
    expect(capped).toMatchObject({ go: false, reason: 'retry-after' });
    expect((capped as { waitMs: number }).waitMs).toBeLessThanOrEqual(500);
  });

  test('per-proxy GCRA: 5 per second with a burst of 2 grants 2 at once, then one per 200 ms; the next proxy in order takes over', async () => {
    const a = healthFromHash('aaaaaaaaaaaa', 'a', {});
    const b = healthFromHash('bbbbbbbbbbbb', 'b', {});
    const wide = validateSpider({ name: 'p', politeness: { concurrencyPerHost: 100 } });
    const ask = (i: number, proxies = [a]) => limiters[i % 6]!.acquire(input(`proxy-${i}.test`, `p-${i}`, { policy: hostPolicy(wide, 'x'), proxies, ratePerProxy: 5, burstPerProxy: 2 }));
    // Four at once from four processes: which two reach the proxy first is theirs to race for.
    const before = await redisNow();
    const first = await Promise.all([0, 1, 2, 3].map((i) => ask(i)));
    const after = await redisNow();
    expect(first.filter((g) => g.go)).toHaveLength(2);
    const waiting = first.filter((g) => !g.go) as { waitMs: number; reason: string }[];
    expect(waiting.map((g) => g.reason)).toEqual(['proxy-rate', 'proxy-rate']);
    // The first of them waits one interval (the second joined the proxy's line behind it), counted
    // from the first grant: 200 ms less what passed on Redis's clock between the first grant and its
    // own call, at most after - before. (The old bound, 100 ms, assumed the four calls ran within
    // 100 ms of each other; a loaded machine can take longer.)
    const w = Math.min(...waiting.map((g) => g.waitMs));
    expect(w).toBeGreaterThanOrEqual(200 - (after - before));
    expect(w).toBeLessThanOrEqual(200);
    // A request that must wait for its proxy gives its host back: the host is free at once.
    const refused = first.findIndex((g) => !g.go);
    expect(await clients[0]!.zcard(keys.polite().hostLeases(`proxy-${refused}.test`))).toBe(0);
    expect(await clients[0]!.hexists(keys.polite().host(`proxy-${refused}.test`), 'last')).toBe(0);
    const other = await ask(4, [a, b]);
    expect(other).toMatchObject({ go: true, proxy: { id: 'bbbbbbbbbbbb' } });
  });

  test('a proxy is banned after banAfterFailures failures in a row; a success in between resets the count; a block never bans', async () => {
    const id = 'cccccccccccc';
    const proxy = healthFromHash(id, 'c', {});
    const outcome = async (o: 'ok' | 'fail' | 'block', n: number) => {
      const grant = await limiters[0]!.acquire(input('ban.test', `b-${n}`, { proxies: [proxy] }));
      expect(grant.go).toBe(true);
      return limiters[0]!.release({ host: 'ban.test', leaseId: `b-${n}`, proxy: { id, outcome: o }, ...released });
    };
    expect(await outcome('fail', 1)).toBe(false);
    expect(await outcome('fail', 2)).toBe(false);
    expect(await outcome('ok', 3)).toBe(false);
    for (let i = 4; i < 10; i++) expect(await outcome('block', i)).toBe(false);
    expect(await outcome('fail', 10)).toBe(false);
    expect(await outcome('fail', 11)).toBe(false);
    expect(await outcome('fail', 12)).toBe(true);
    const health = healthFromHash(id, 'c', await clients[0]!.hgetall(keys.polite().proxy(id)));
    expect(health).toMatchObject({ banned: true, ok: 1, fail: 11, blocks: 6, consecutive: 3, bans: 1 });
  });
});
