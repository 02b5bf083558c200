import { loadEnv, parseDuration } from '@crawlfleet/core';
import { collectedStatus, describeSink, emptyCounters, gcVerdict, summaryFields, type CrawlStatus } from '@crawlfleet/crawl';
import { exportsCrawl } from '@crawlfleet/monitoring';
import { finishedBefore, isoMoment } from '../../services/cli/src/arguments.js';
import { formatCollected, formatGcReport, gcCutoff } from '../../services/cli/src/commands/gc.js';
import { formatStatus } from '../../services/cli/src/commands/status.js';

const HOUR = 3_600_000;

describe('durations (CRAWL_RETENTION, gc --finished-before)', () => {
  test('a number and a unit, or several summed; 0 alone; anything else is not one', () => {
    expect(parseDuration('7d')).toBe(7 * 24 * HOUR);
    expect(parseDuration('36h')).toBe(36 * HOUR);
    expect(parseDuration('1h30m')).toBe(1.5 * HOUR);
    expect(parseDuration('90m')).toBe(1.5 * HOUR);
    expect(parseDuration('45s')).toBe(45_000);
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('2w')).toBe(14 * 24 * HOUR);
    expect(parseDuration('1.5h')).toBe(1.5 * HOUR);
    expect(parseDuration(' 0 ')).toBe(0);
    expect(parseDuration('0s')).toBe(0);
    for (const bad of ['', '7', 'd', '7 days', '-1d', '1y', 'soon', '1h 30m']) expect({ bad, ms: parseDuration(bad) }).toEqual({ bad, ms: undefined });
  });

  test('CRAWL_RETENTION: 7 days by default, `off`, or a bad value named in the error', () => {
    expect(loadEnv({}).crawlRetentionMs).toBe(7 * 24 * HOUR);
    expect(loadEnv({ CRAWL_RETENTION: '12h' }).crawlRetentionMs).toBe(12 * HOUR);
    expect(loadEnv({ CRAWL_RETENTION: 'off' }).crawlRetentionMs).toBeUndefined();
    expect(() => loadEnv({ CRAWL_RETENTION: 'a week' })).toThrow(/CRAWL_RETENTION: must be a duration/);
    expect(loadEnv({}).metricsFinishedMs).toBe(300_000);
    expect(() => loadEnv({ METRICS_FINISHED_SECONDS: '5m' })).toThrow(/METRICS_FINISHED_SECONDS/);
  });

  test('gc --finished-before: a duration before now or an ISO 8601 moment; without it, the retention', () => {
    const now = Date.parse('2026-12-10T12:00:00.000Z');
    expect(gcCutoff('7d', undefined, now).toISOString()).toBe('2026-12-03T12:00:00.000Z');
    expect(gcCutoff('2026-12-01', undefined, now).toISOString()).toBe('2026-12-01T00:00:00.000Z');
    expect(gcCutoff('2026-12-01T10:00:00+02:00', undefined, now).toISOString()).toBe('2026-12-01T08:00:00.000Z');
    expect(gcCutoff(undefined, 36 * HOUR, now).toISOString()).toBe('2026-12-09T00:00:00.000Z');
    expect(() => gcCutoff(undefined, undefined, now)).toThrow(expect.objectContaining({ code: 'ERR_CONFIG', message: expect.stringContaining('CRAWL_RETENTION is off') }));
    expect(isoMoment('2026-13-45')).toBeUndefined();
    expect(finishedBefore('36h')).toBe('36h');
    expect(() => finishedBefore('last week')).toThrow(/--finished-before must be a duration/);
  });
});

describe("gc's verdict", () => {
  const cutoff = '2026-12-03T12:00:00.000Z';
  const meta = (fields: Partial<Parameters<typeof gcVerdict>[0]>) => ({ state: 'done', finishedAt: null, startedAt: '2026-12-01T00:00:00.000Z', collectedAt: null, gcParts: null, ...fields });
  test('only finished crawls, finished at or before the cutoff; a collection cut short is taken up again', () => {
    expect(gcVerdict(meta({ finishedAt: '2026-12-02T00:00:00.000Z' }), cutoff)).toBe('collect');
    expect(gcVerdict(meta({ state: 'failed', finishedAt: cutoff }), cutoff)).toBe('collect');
    expect(gcVerdict(meta({ state: 'cancelled', finishedAt: '2026-12-03T12:00:00.001Z' }), cutoff)).toBe('recent');
    // no finishedAt (a crawl of an older fleet): its start stands in
    expect(gcVerdict(meta({}), cutoff)).toBe('collect');
    expect(gcVerdict(meta({ startedAt: '2026-12-04T00:00:00.000Z' }), cutoff)).toBe('recent');
    for (const state of ['running', 'paused']) expect(gcVerdict(meta({ state, finishedAt: '2026-01-01T00:00:00.000Z' }), cutoff)).toBe('live');
    expect(gcVerdict(meta({ collectedAt: cutoff, gcParts: '16' }), cutoff)).toBe('resume');
    expect(gcVerdict(meta({ collectedAt: cutoff, gcParts: '0' }), cutoff)).toBe('resume');
    expect(gcVerdict(meta({ collectedAt: cutoff }), cutoff)).toBe('finish');
  });
});

describe("a collected crawl's summary", () => {
  const status = (): CrawlStatus => ({
    crawlId: 'books-1',
    spider: 'books',
    state: 'done',
    counters: { ...emptyCounters(), seen: 1200, fetched: 1180, parsed: 1170, items: 1180, written: 1180, failed: 20, retries: 3 },
    queues: { fetch: { waiting: 0, active: 0, delayed: 0, failed: 18 }, parse: { waiting: 0, active: 0, delayed: 0, failed: 0 }, write: { waiting: 0, active: 0, delayed: 0, failed: 2 } },
    frontier: 0,
    hosts: [],
    partitions: 16,
    startedAt: '2026-12-01T10:00:00.000Z',
    finishedAt: '2026-12-01T11:00:00.000Z',
  });

  const dates = { state: 'done', spiderName: 'books', startedAt: '2026-12-01T10:00:00.000Z', finishedAt: '2026-12-01T11:00:00.000Z', collectedAt: '2026-12-08T11:00:00.000Z' };

  test('keeps the final counters and dead letters per stage and the sink, in short fields (a listpack of a few hundred bytes)', () => {
    const fields = summaryFields(status(), JSON.stringify({ kind: 'jsonl', path: '/data/books-1/items.jsonl' }));
    expect(fields).toEqual({
      'c.seen': '1200',
      'c.fetched': '1180',
      'c.parsed': '1170',
      'c.items': '1180',
      'c.written': '1180',
      'c.failed': '20',
      'c.retries': '3',
      'c.dead.fetch': '18',
      'c.dead.write': '2',
      sink: 'jsonl /data/books-1/items.jsonl',
    });
    const back = collectedStatus('books-1', { ...dates, ...fields });
    const { hosts: _h, partitions: _p, ...rest } = status();
    expect(back).toEqual({ ...rest, hosts: [], partitions: 0, collected: { at: '2026-12-08T11:00:00.000Z', sink: 'jsonl /data/books-1/items.jsonl', items: 1180 } });
  });

  test('a MongoDB sink is described by its URL, never with credentials (they are never stored)', () => {
    expect(describeSink({ kind: 'mongo', url: 'mongodb://db:27017/shop', needsCredentials: true })).toBe('mongo mongodb://db:27017/shop');
    expect(describeSink({ kind: 'mongo' })).toBe("mongo (the writers' MONGO_URL)");
    expect(describeSink({ kind: 'csv', path: '/out/x.csv' })).toBe('csv /out/x.csv');
  });

  test('status prints it marked as collected, with its counters and no queues', () => {
    const fields = summaryFields(status(), JSON.stringify({ kind: 'csv', path: '/out/b.csv' }));
    const text = formatStatus(collectedStatus('books-1', { ...fields, state: 'done', spiderName: 'books', startedAt: 'a', finishedAt: 'b', collectedAt: 'c' }));
    expect(text.split('\n')).toEqual([
      'books-1 (books): done, started a, finished b, collected c',
      '  seen 1200  fetched 1180  parsed 1170  items 1180  written 1180',
      '  invalid 0  failed 20  blocked 0  retries 3  skipped 0',
      '  summary only (gc): 1180 items in csv /out/b.csv',
    ]);
  });

  test("gc's lines and total", () => {
    const crawl = { crawlId: 'b', state: 'done', finishedAt: '2026-12-01T11:00:00.000Z', jobs: 2, keys: 40 };
    expect(formatCollected(crawl, false)).toBe('collected b: done, finished 2026-12-01T11:00:00.000Z; 40 keys and 2 jobs removed');
    expect(formatCollected(crawl, true)).toBe('would collect b: done, finished 2026-12-01T11:00:00.000Z');
    const report = { finishedBefore: 'T', dryRun: false, collected: [crawl, crawl], recent: 3, live: 1, events: 12 };
    expect(formatGcReport(report)).toBe(
      'gc: collected 2 crawls finished before T (80 keys and 4 BullMQ jobs removed, a summary of each kept; 12 older queue events trimmed); 3 finished later kept, 1 running or paused',
    );
    expect(formatGcReport({ ...report, dryRun: true })).toBe('gc --dry-run: 2 crawls finished before T would be collected; 3 finished later kept, 1 running or paused');
  });
});

describe('crawl metrics', () => {
  const now = Date.parse('2026-12-01T12:00:00.000Z');
  const at = (msAgo: number) => new Date(now - msAgo).toISOString();
  test('running and paused crawls, and a finished one for the window after its end; never a collected one', () => {
    expect(exportsCrawl({ state: 'running', finishedAt: null, collectedAt: null }, now, 300_000)).toBe(true);
    expect(exportsCrawl({ state: 'paused', finishedAt: null, collectedAt: null }, now, 0)).toBe(true);
    expect(exportsCrawl({ state: 'done', finishedAt: at(299_000), collectedAt: null }, now, 300_000)).toBe(true);
    expect(exportsCrawl({ state: 'done', finishedAt: at(301_000), collectedAt: null }, now, 300_000)).toBe(false);
    expect(exportsCrawl({ state: 'cancelled', finishedAt: at(1), collectedAt: null }, now, 0)).toBe(false);
    expect(exportsCrawl({ state: 'failed', finishedAt: null, collectedAt: null }, now, 300_000)).toBe(false);
    expect(exportsCrawl({ state: 'done', finishedAt: at(1000), collectedAt: at(0) }, now, 300_000)).toBe(false);
    expect(exportsCrawl({ state: null, finishedAt: null, collectedAt: null }, now, 300_000)).toBe(false);
  });
});
