// The lifecycle fuzzer's pure parts (test/fuzz): a seed always draws the same schedule, the mix covers
// every operation, fault and feature, and each invariant names the damage it sees.
import { checkEnd, checkProgress, checkResources } from '../fuzz/invariants.mjs';
import { describeStep, drawSchedule } from '../fuzz/schedule.mjs';
import { siteModel } from '../fuzz/site.mjs';

describe('the fuzz schedule', () => {
  test('the same seed draws the same schedule, another seed another one', () => {
    expect(drawSchedule(1234, 'long')).toEqual(drawSchedule(1234, 'long'));
    expect(drawSchedule(1234, 'short')).toEqual(drawSchedule(1234, 'short'));
    expect(JSON.stringify(drawSchedule(1234, 'long'))).not.toEqual(JSON.stringify(drawSchedule(1235, 'long')));
  });

  test('over many seeds, every operation, fault and feature is drawn', () => {
    const ops = new Set<string>();
    const features = { partitions: new Set<number>(), parseInFetcher: new Set<boolean>(), renderers: 0, warc: 0, redirects: 0, browserRedirects: 0, slow: 0, flaky: 0 };
    for (let seed = 1; seed <= 300; seed++) {
      const { config, steps } = drawSchedule(seed, 'long');
      for (const s of steps) ops.add(s.op);
      features.partitions.add(config.partitions);
      for (const p of config.parseInFetcher) features.parseInFetcher.add(p);
      features.renderers += config.renderers;
      features.warc += Number(config.warc);
      features.redirects += config.redirects;
      features.browserRedirects += config.browserRedirects;
      features.slow += Number(config.slowMs > 0);
      features.flaky += Number(config.flaky);
    }
    for (const op of ['kills', 'redis-kill', 'mongo-outage', 'skew', 'pause', 'pause-left', 'reseed', 'gc', 'replay', 'cancel', 'reset', 'recrawl']) expect(ops).toContain(op);
    expect([...features.partitions].sort((a, b) => a - b)).toEqual([1, 4, 16]);
    expect([...features.parseInFetcher].sort()).toEqual([false, true]);
    for (const n of [features.renderers, features.warc, features.redirects, features.browserRedirects, features.slow, features.flaky]) expect(n).toBeGreaterThan(0);
  });

  test('a step prints as one line with its point and its arguments', () => {
    expect(describeStep({ n: 3, at: 0.25, op: 'kills', role: 'renderer', count: 4, everyMs: 900 })).toBe('step 3 at 25%: kills role=renderer count=4 everyMs=900');
    expect(describeStep({ n: 5, at: 'end', op: 'gc' })).toBe('step 5 after the end: gc');
  });

  test("the site's truth: an item per page, the landing page of a browser redirect, no item for a redirect", () => {
    const config = drawSchedule(1, 'short').config;
    const model = siteModel({ ...config, hosts: 2, pagesPerHost: 3, redirects: 1, renderPages: 1, browserRedirects: 1, deadPerHost: 1, orphansPerHost: 1 }, 8080);
    expect([...model.items.keys()].sort()).toEqual(
      [
        'http://fuzz-1.test:8080/index.html',
        'http://fuzz-1.test:8080/p/0.html',
        'http://fuzz-1.test:8080/p/1.html',
        'http://fuzz-1.test:8080/p/2.html',
        'http://fuzz-1.test:8080/app/0.html',
        'http://fuzz-1.test:8080/app/landing-1-0.html',
        'http://fuzz-2.test:8080/index.html',
        'http://fuzz-2.test:8080/p/0.html',
        'http://fuzz-2.test:8080/p/1.html',
        'http://fuzz-2.test:8080/p/2.html',
        'http://fuzz-2.test:8080/app/0.html',
        'http://fuzz-2.test:8080/app/landing-0-0.html',
      ].sort(),
    );
    expect([...model.dead].sort()).toEqual(['http://fuzz-1.test:8080/missing/0.html', 'http://fuzz-2.test:8080/missing/0.html']);
    expect(model.orphans.map((o) => o.url)).toEqual(['http://fuzz-1.test:8080/orphan/0.html', 'http://fuzz-2.test:8080/orphan/0.html']);
  });
});

describe('the fuzz invariants', () => {
  const items = new Map([
    ['http://a.test/1', 'One'],
    ['http://a.test/2', 'Two'],
  ]);
  const dead = new Set(['http://a.test/gone']);
  const expectation = { state: 'done', items, dead, exact: true, writtenIsSink: true, runs: 1, replays: 0, plainFetched: new Set([...items.keys(), ...dead]) };
  type Seen = {
    finalState: string;
    counters: Record<string, number>;
    collected: boolean;
    stored: { url: string; title: string }[];
    deadLetters: { url: string; code: string; reason: string }[];
    queuedJobs: Record<string, number>;
    leftoverSets: Record<string, string[]>;
    leasesHeld: Record<string, number>;
    warc: { captures: { uri: string }[]; invalidFiles: { file: string }[] };
    chromiumLeft: number[];
    tempLeft: string[];
  };
  const exactSeen = (): Seen => ({
    finalState: 'done',
    counters: { items: 2, written: 2, failed: 1, invalid: 0, archived: 3 },
    collected: false,
    stored: [...items].map(([url, title]) => ({ url, title })),
    deadLetters: [{ url: 'http://a.test/gone', code: 'ERR_HTTP_STATUS', reason: 'HTTP 404' }],
    queuedJobs: {},
    leftoverSets: { 'pending:fetch': [] },
    leasesHeld: {},
    warc: { captures: [...items.keys(), ...dead].map((uri) => ({ uri })), invalidFiles: [] },
    chromiumLeft: [],
    tempLeft: [],
  });

  test('an exact run passes', () => {
    expect(checkEnd(expectation, exactSeen())).toEqual([]);
  });

  test('each kind of damage is named', () => {
    const found = (change: (s: Seen) => void) => {
      const seen = exactSeen();
      change(seen);
      return checkEnd(expectation, seen).join('\n');
    };
    expect(found((s) => s.stored.push({ url: 'http://a.test/1', title: 'One' }))).toMatch(/stored more than once/);
    expect(found((s) => (s.counters.written = 1))).toMatch(/written 1, the sink holds 2/);
    expect(
      found((s) => {
        s.collected = true;
        s.counters.written = 1;
      }),
    ).toMatch(/the collected summary says written 1, the sink holds 2/);
    expect(found((s) => s.stored.pop())).toMatch(/1 items missing from the sink/);
    expect(found((s) => (s.finalState = 'running'))).toMatch(/ended running, expected done/);
    expect(found((s) => (s.queuedJobs = { 'fetch:delayed': 1 }))).toMatch(/1 jobs left in BullMQ fetch:delayed/);
    expect(found((s) => (s.leftoverSets = { 'parked:fetch': ['f:1'] }))).toMatch(/set parked:fetch not empty/);
    expect(found((s) => (s.leasesHeld = { 'p:{polite:3}:host:a.test:leases': 1 }))).toMatch(/still has 1 requests in flight/);
    expect(found((s) => s.warc.captures.push({ uri: 'http://a.test/1' }))).toMatch(/archived more than once per run: http:\/\/a.test\/1 ×2/);
    expect(found((s) => (s.chromiumLeft = [4242]))).toMatch(/Chromium processes left/);
    expect(found((s) => (s.tempLeft = ['playwright_chromiumdev_profile-x']))).toMatch(/temporary directories left/);
    expect(found((s) => (s.deadLetters = [{ url: 'http://a.test/2', code: 'ERR_JOB_LOST', reason: 'lost' }]))).toMatch(/unexpected dead letters/);
  });

  test('a replay allows the dead letters one more capture each, and nothing else', () => {
    const seen = exactSeen();
    seen.warc.captures.push({ uri: 'http://a.test/gone' });
    expect(checkEnd({ ...expectation, replays: 1 }, seen)).toEqual([]);
    seen.warc.captures.push({ uri: 'http://a.test/2' });
    expect(checkEnd({ ...expectation, replays: 1 }, seen).join('\n')).toMatch(/http:\/\/a.test\/2 ×2/);
  });

  test('along the way: counters go back only across an operation, and a done crawl does no work', () => {
    const prev = { state: 'running', counters: { fetched: 5, written: 3 } };
    expect(checkProgress(prev, { state: 'running', counters: { fetched: 4, written: 3 } }, { opened: false })).toEqual(['counter fetched went back from 5 to 4 within a run']);
    expect(checkProgress(prev, { state: 'running', counters: { fetched: 0, written: 0 } }, { opened: true })).toEqual([]);
    const done = { state: 'done', counters: { fetched: 5, written: 3 } };
    expect(checkProgress(done, { state: 'done', counters: { fetched: 6, written: 3 } }, { opened: false })).toEqual(['work after done: fetched 5→6']);
    expect(checkProgress(done, { state: 'running', counters: { fetched: 5, written: 3 } }, { opened: false })).toEqual(['the crawl went from done back to running with no operation that opens it']);
  });

  test('RSS and Redis memory against their bounds', () => {
    const bounds = { rssBytes: 100 * 2 ** 20, redisBytes: 50 * 2 ** 20 };
    expect(checkResources({ rssByProcess: { 'fetcher-1': 90 * 2 ** 20 }, redisUsedBytes: 10 * 2 ** 20 }, bounds)).toEqual([]);
    expect(checkResources({ rssByProcess: { 'renderer-1': 150 * 2 ** 20 }, redisUsedBytes: 60 * 2 ** 20 }, bounds)).toEqual([
      'renderer-1 RSS 150 MiB over the bound 100 MiB',
      'Redis used_memory 60 MiB over the bound 50 MiB',
    ]);
  });
});
