import {
  ConfigError,
  DEFAULT_BLOCK_PATTERNS,
  Keys,
  POLITE_SHARDS,
  keySlot,
  partitionOfHost,
  jobId,
  politeShard,
  parseRetryAfter,
  redactUrl,
  retryDelay,
  urlFingerprint,
  validateJob,
  validateSpider,
  itemKeyConflicts,
  sinkSpecFor,
} from '@crawlfleet/core';

describe('spider validation', () => {
  test('fills in the contract defaults', () => {
    const s = validateSpider({ name: 'x', startUrls: ['http://a.com/'] });
    expect(s).toMatchObject({
      obeyRobotsTxt: true,
      allowPrivateAddresses: false,
      follow: [],
      items: [],
      politeness: { concurrencyPerHost: 8, delayPerHost: 0, randomizeDelay: false, autoThrottle: { enabled: false, targetConcurrency: 16, maxDelay: 5000 } },
      retry: { attempts: 3, statusCodes: [429, 500, 502, 503, 504, 522, 524] },
      proxies: { strategy: 'weighted', ratePerProxy: 0, burstPerProxy: 1, banAfterFailures: 10 },
      blockPatterns: DEFAULT_BLOCK_PATTERNS,
    });
    expect(s.maxDepth).toBeUndefined();
    expect(s.maxPages).toBeUndefined();
  });

  test('every problem is reported with the file and its path', () => {
    let error: ConfigError | undefined;
    try {
      validateSpider({ name: 'bad name', startUrls: ['ftp://x/'], items: [{ type: 't', fields: { a: {} } }], extra: 1 }, 'my.json');
    } catch (err) {
      error = err as ConfigError;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(error!.code).toBe('ERR_CONFIG');
    expect(error!.issues).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^my\.json: name: /),
        expect.stringMatching(/^my\.json: startUrls\[0\]: only http and https/),
        'my.json: items[0].fields.a: a field needs exactly one of css or json',
        'my.json: (top level): unknown key(s) "extra"',
      ]),
    );
  });

  test('two rules of one item type with two keys are refused, naming both (sinks key each type by one field)', () => {
    const rule = (key: string | undefined, field: string) => ({ type: 'book', ...(key ? { key } : {}), fields: { [field]: { css: 'h1' }, title: { css: 'h1' } } });
    expect(() => validateSpider({ name: 's', items: [rule('upc', 'upc'), rule('isbn', 'isbn')] }, 'two.json')).toThrow(
      'two.json: items[1].key: item type "book" is keyed by "upc" in items[0], and by "isbn" here: every rule of one type needs the same key, which its sinks deduplicate and upsert by',
    );
    // The default key counts: a rule without one is keyed by url.
    expect(() => validateSpider({ name: 's', items: [rule(undefined, 'x'), rule('upc', 'upc')] })).toThrow(/item type "book" is keyed by "url" in items\[0\], and by "upc" here/);
    // A code spider's itemKeys must agree with its rules too.
    expect(() => validateSpider({ name: 's', itemKeys: { book: 'upc' }, items: [rule('isbn', 'isbn')] })).toThrow(/keyed by "upc" in itemKeys\.book, and by "isbn" here/);
    // One key for the type, however many rules: accepted.
    expect(validateSpider({ name: 's', itemKeys: { book: 'upc' }, items: [rule('upc', 'upc'), rule('upc', 'upc')] }).items).toHaveLength(2);
    expect(itemKeyConflicts([{ type: 'a' }, { type: 'b', key: 'id' }, { type: 'a', key: 'url' }], {})).toEqual([]);
  });
});

describe('keys and ids', () => {
  test('queue keys, crawl keys and partition keys carry their hash tags', () => {
    const keys = new Keys('cf');
    // Each stage's queue in its own third of the slot space: on three masters, three queues on three.
    expect(['fetch', 'parse', 'write'].map((s) => keys.queuePrefix(s as 'fetch'))).toEqual(['cf:{fetch}', 'cf:{parse}', 'cf:{write/0}']);
    expect(['fetch', 'parse', 'write'].map((s) => Math.floor((keySlot(keys.queuePrefix(s as 'fetch')) * 3) / 16384))).toEqual([0, 1, 2]);
    for (const key of keys.crawlOwnKeys('books-1')) expect(key).toMatch(/^cf:crawl:\{books-1\}:/);
    // A crawl of one partition: its tag is the crawl id with the partition's number.
    expect(keys.part('books-1', 0, 1).pending.parse).toBe('cf:crawl:{books-1/0.0}:pending:parse');
    // Of sixteen: each partition's tag lands in its sixteenth of the slot space, every key of it in one slot.
    for (let p = 0; p < 16; p++) {
      const k = keys.part('books-1', p, 16);
      const slots = new Set(keys.partFixedKeys(k).map(keySlot));
      expect(slots.size).toBe(1);
      expect(Math.floor([...slots][0]! / 1024)).toBe(p);
      expect(k.hostQueue).toMatch(/^cf:crawl:\{books-1\/\d+\.\d+\}:hq:$/);
    }
  });

  test("a host's partition is the same everywhere, and hosts spread over the partitions", () => {
    expect(partitionOfHost('example.com', 16)).toBe(partitionOfHost('example.com', 16));
    expect(partitionOfHost('example.com', 1)).toBe(0);
    const counts = new Array(16).fill(0);
    for (let i = 0; i < 1600; i++) counts[partitionOfHost(`host-${i}.example`, 16)]++;
    expect(Math.min(...counts)).toBeGreaterThan(60);
    expect(Math.max(...counts)).toBeLessThan(140);
  });

  test('job ids are deterministic, never all digits, never contain ":"', () => {
    const fp = urlFingerprint('c1', 'http://a.com/');
    expect(fp).toBe(urlFingerprint('c1', 'http://a.com/'));
    expect(fp).not.toBe(urlFingerprint('c2', 'http://a.com/'));
    expect(jobId('fetch', fp)).toMatch(/^f[0-9a-f]{32}$/);
    expect(jobId('write', fp)).not.toContain(':');
  });

  test('job payloads are validated with a readable reason', () => {
    expect(validateJob('fetch', { crawlId: 'c1', url: 'http://a.com/', depth: 0 })).toEqual({ ok: true, job: { crawlId: 'c1', url: 'http://a.com/', depth: 0 } });
    const bad = validateJob('fetch', { crawlId: 'c:1', url: 'nope', depth: 1.5 });
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.reason).toMatch(/^invalid fetch job: crawlId: .*url: .*depth: /);
  });
});

describe('retry policy', () => {
  test('exponential backoff with jitter, honouring Retry-After', () => {
    expect(retryDelay(1, undefined, { random: () => 0 })).toBe(250);
    expect(retryDelay(1, undefined, { random: () => 1 })).toBe(500);
    expect(retryDelay(3, undefined, { random: () => 1 })).toBe(2000);
    expect(retryDelay(30, undefined, { random: () => 1 })).toBe(60_000);
    expect(retryDelay(1, 3000, { random: () => 1 })).toBe(3000);
  });

  test('Retry-After in seconds or as an HTTP date', () => {
    expect(parseRetryAfter('3')).toBe(3000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4_000)).toBe(6000);
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter(undefined)).toBeUndefined();
  });

  test('Retry-After is capped: 31 years, a date a year ahead and 10^30 seconds all come down to the cap; garbage and odd forms are ignored', () => {
    const now = Date.UTC(2026, 11, 3);
    const cap = 300_000;
    expect(parseRetryAfter('999999999', now, cap)).toBe(cap);
    expect(parseRetryAfter(`1${'0'.repeat(30)}`, now, cap)).toBe(cap);
    expect(parseRetryAfter(new Date(now + 365 * 86_400_000).toUTCString(), now, cap)).toBe(cap);
    expect(parseRetryAfter('Thursday, 03-Dec-26 00:00:30 GMT', now, cap)).toBe(30_000);
    expect(parseRetryAfter('Thu Dec  3 00:00:10 2026', now, cap)).toBe(10_000);
    expect(parseRetryAfter(new Date(now - 60_000).toUTCString(), now, cap)).toBe(0);
    expect(parseRetryAfter('120', now, cap)).toBe(120_000);
    for (const garbage of ['-5', '1.5', 'in 5 minutes', '0x10', 'Infinity', '💤', '12 GMT']) expect(parseRetryAfter(garbage, now, cap)).toBeUndefined();
  });

  test('the spider settings of this: retry.maxRetryAfterMs (default 5 minutes) and limits.maxLinksPerPage (default 10,000)', () => {
    const spider = validateSpider({ name: 's' });
    expect(spider.retry.maxRetryAfterMs).toBe(300_000);
    expect(spider.limits.maxLinksPerPage).toBe(10_000);
    expect(validateSpider({ name: 's', retry: { maxRetryAfterMs: 2000 }, limits: { maxLinksPerPage: 5 } })).toMatchObject({ retry: { maxRetryAfterMs: 2000 }, limits: { maxLinksPerPage: 5 } });
  });
});

describe('credentials never reach logs', () => {
  test('redactUrl hides user and password of every URL in a string', () => {
    expect(redactUrl('connect redis://u:p4ss@h:6379/0 and http://proxy:pw@10.0.0.1:3128 ok')).toBe('connect redis://***:***@h:6379/0 and http://***:***@10.0.0.1:3128 ok');
    expect(redactUrl('http://plain.host/a')).toBe('http://plain.host/a');
  });
});

describe('sinks', () => {
  test('the output kind follows the extension', () => {
    expect(sinkSpecFor('out/items.jsonl', '/w')).toEqual({ kind: 'jsonl', path: '/w/out/items.jsonl' });
    expect(sinkSpecFor('/tmp/x.csv')).toEqual({ kind: 'csv', path: '/tmp/x.csv' });
    expect(() => sinkSpecFor('x.xml')).toThrow(ConfigError);
  });
});

describe('politeness keys on a cluster', () => {
  test("a host's keys and its robots.txt share one of POLITE_SHARDS slots by the host's hash; the proxies share {polite}", () => {
    const k = new Keys('p').polite();
    const shard = politeShard('books.example');
    expect(k.host('books.example')).toBe(`p:{polite:${shard}}:host:books.example`);
    expect(k.hostLeases('books.example')).toBe(`p:{polite:${shard}}:host:books.example:leases`);
    expect(k.robots('https://books.example:8443')).toBe(`p:{polite:${shard}}:robots:https://books.example:8443`);
    expect(k.robotsLock('http://books.example')).toBe(`p:{polite:${shard}}:robots-lock:http://books.example`);
    expect(k.proxy('abc')).toBe('p:{polite}:proxy:abc');
    expect(k.proxies).toBe('p:{polite}:proxies');
  });

  test('hosts spread evenly: 10,000 host names fill every shard, none with more than 1.2 times its share', () => {
    const counts = new Array<number>(POLITE_SHARDS).fill(0);
    for (let i = 0; i < 10_000; i++) counts[politeShard(`shop-${i}.example.com`)]!++;
    expect(Math.min(...counts)).toBeGreaterThan(0);
    expect(Math.max(...counts)).toBeLessThan((10_000 / POLITE_SHARDS) * 1.2);
    // and the same host always lands in the same shard, in every process
    expect(politeShard('shop-1.example.com')).toBe(politeShard('shop-1.example.com'));
  });
});
