import { emptyCounters, type CrawlStatus } from '@crawlfleet/crawl';
import { RateMeter, progressLine } from '../../services/cli/src/progress.js';
import { formatHosts } from '../../services/cli/src/commands/status.js';

test('the TTY progress line shows pages per second, queue depths, items, errors and an ETA', () => {
  const q = { waiting: 0, active: 0, delayed: 0, failed: 0 };
  const status: CrawlStatus = {
    crawlId: 'c',
    spider: 's',
    state: 'running',
    counters: { ...emptyCounters(), seen: 500, fetched: 200, items: 340, written: 300, failed: 2, retries: 5 },
    queues: { fetch: { ...q, waiting: 280, active: 16, delayed: 4 }, parse: { ...q, waiting: 3, active: 2 }, write: { ...q, active: 1 } },
    frontier: 0,
    hosts: [],
    partitions: 1,
    startedAt: '',
    finishedAt: null,
  };
  expect(progressLine(status, 50)).toBe('running | 200/500 pages | 50.0/s | queues fetch 300 parse 5 write 1 | items 340 (written 300) | errors 2 failed, 5 retries | ETA 0:06');
  expect(progressLine(status, 0)).toContain('ETA --:--');
});

test('RateMeter measures over a sliding window', () => {
  const m = new RateMeter(5000);
  expect(m.add(0, 0)).toBe(0);
  expect(m.add(100, 1000)).toBe(100);
  expect(m.add(300, 2000)).toBe(150);
});

test("status names the hosts with the most URLs waiting, and each one's turn", () => {
  expect(
    formatHosts([
      { host: 'slow.test', waiting: 248, inFlight: 1, concurrency: 1, delayMs: 1000, nextTurnInMs: null },
      { host: 'held.test', waiting: 40, inFlight: 0, concurrency: 8, delayMs: 0, nextTurnInMs: 12_500 },
      { host: 'fast.test', waiting: 3, inFlight: 5, concurrency: 8, delayMs: 0, nextTurnInMs: 0 },
    ]),
  ).toEqual([
    '  hosts with the most URLs waiting:',
    '    slow.test: 248 waiting, 1 in flight, at its concurrency (1), 1000 ms apart',
    '    held.test: 40 waiting, 0 in flight, next turn in 12.5 s',
    '    fast.test: 3 waiting, 5 in flight, its turn now',
  ]);
  expect(formatHosts([])).toEqual([]);
});
