import { classifyFinalFailure, decideOrphan, replayPlan, selectDeadLetters, type DeadLetterEntry } from '@crawlfleet/crawl';
import { decodeRequest, encodeRequest, queuedRequest } from '@crawlfleet/frontier';

const FP = '0123456789abcdef0123456789abcdef';

describe('the reconciler decides what a pending id needs', () => {
  const now = 1_000_000;
  test.each([
    ['a live job', { presence: 'live' as const }, 'keep'],
    ['a live job seen lost before', { presence: 'live' as const, firstSeenMs: now - 60_000 }, 'keep'],
    ['missing, first seen now', { presence: 'missing' as const }, 'suspect'],
    ['missing within the grace period', { presence: 'missing' as const, firstSeenMs: now - 29_999 }, 'keep'],
    ['missing past the grace period', { presence: 'missing' as const, firstSeenMs: now - 30_000 }, 'rebuild'],
    ['completed without its finish, past the grace period', { presence: 'completed' as const, firstSeenMs: now - 31_000 }, 'rebuild'],
    ['failed by BullMQ, past the grace period', { presence: 'failed' as const, firstSeenMs: now - 31_000, failedReason: 'boom' }, 'dead-letter'],
  ])('%s', (_what, input, kind) => {
    expect(decideOrphan({ ...input, nowMs: now, graceMs: 30_000 }).kind).toBe(kind);
  });

  test("BullMQ's stall limit is ERR_STALLED; any other final failure is ERR_JOB_FAILED with its reason", () => {
    expect(classifyFinalFailure('job stalled more than allowable limit')).toEqual({
      code: 'ERR_STALLED',
      reason: 'job stalled more than allowable limit: its worker died or hung on it every time (maxStalledCount)',
    });
    expect(classifyFinalFailure('Missing lock for job f1')).toEqual({ code: 'ERR_JOB_FAILED', reason: 'Missing lock for job f1' });
    expect(classifyFinalFailure(undefined)).toEqual({ code: 'ERR_JOB_FAILED', reason: 'failed without a recorded reason' });
  });

  test('a request kept for a lost fetch job round-trips; anything else decodes to nothing', () => {
    expect(decodeRequest(encodeRequest({ url: 'https://a.test/x', depth: 2 }))).toEqual({ url: 'https://a.test/x', depth: 2 });
    expect(decodeRequest(encodeRequest({ url: 'https://a.test/y', depth: 0, redirects: 3 }))).toEqual({ url: 'https://a.test/y', depth: 0, redirects: 3 });
    // The frontier's compact form: depth and URL, the rest as a line of JSON when there is any.
    expect(encodeRequest({ url: 'https://a.test/x', depth: 2 })).toBe('2 https://a.test/x');
    expect(encodeRequest({ url: 'https://a.test/x', depth: 1, referer: 'https://a.test/' })).toBe('1 https://a.test/x\n{"r":"https://a.test/"}');
    // A request kept in the older JSON form still reads.
    expect(decodeRequest('{"u":"https://a.test/x","d":2}')).toEqual({ url: 'https://a.test/x', depth: 2 });
    for (const bad of [null, '', '{', '{"u":1,"d":0}', '{"u":"x"}', 'x https://a.test/', '2', '1 https://a.test/\n{']) expect(decodeRequest(bad)).toBeUndefined();
  });
});

describe('dead letters: selection and how each runs again', () => {
  const entry = (over: Partial<DeadLetterEntry>): DeadLetterEntry => ({
    jobId: `f${FP}`,
    url: 'https://a.test/p/1',
    stage: 'fetch',
    code: 'ERR_HTTP_STATUS',
    reason: 'HTTP 503',
    attempts: 4,
    at: '2026-12-03T00:00:00Z',
    ...over,
  });

  test('--code and --url-regex select; the list is in URL order', () => {
    const all = [entry({ url: 'https://a.test/p/2', code: 'ERR_BLOCKED' }), entry({ url: 'https://a.test/p/1' }), entry({ url: 'https://b.test/x' })];
    expect(selectDeadLetters(all, {}).map((e) => e.url)).toEqual(['https://a.test/p/1', 'https://a.test/p/2', 'https://b.test/x']);
    expect(selectDeadLetters(all, { code: 'ERR_HTTP_STATUS' }).map((e) => e.url)).toEqual(['https://a.test/p/1', 'https://b.test/x']);
    expect(selectDeadLetters(all, { code: 'ERR_HTTP_STATUS', urlRegex: /^https:\/\/a\./ }).map((e) => e.url)).toEqual(['https://a.test/p/1']);
  });

  test('a fetch or parse dead letter is fetched again at its depth; a write dead letter is written again from its items; a poison job is not replayable', () => {
    expect(replayPlan(entry({ data: { crawlId: 'c', url: 'https://a.test/p/1', depth: 3 } }), 'c')).toEqual({ stage: 'fetch', id: `f${FP}`, request: { url: 'https://a.test/p/1', depth: 3 } });
    expect(replayPlan(entry({ jobId: `p${FP}`, stage: 'parse', data: { crawlId: 'c', url: 'https://a.test/p/1', finalUrl: 'https://a.test/p/1', depth: 2 } }), 'c')).toEqual({
      stage: 'fetch',
      id: `f${FP}`,
      request: { url: 'https://a.test/p/1', depth: 2 },
    });
    // A code spider's link metadata runs again with its page.
    expect(replayPlan(entry({ jobId: `p${FP}`, stage: 'parse', data: { crawlId: 'c', url: 'https://a.test/p/1', finalUrl: 'https://a.test/p/1', depth: 2, meta: { id: 7 } } }), 'c')).toEqual({
      stage: 'fetch',
      id: `f${FP}`,
      request: { url: 'https://a.test/p/1', depth: 2, meta: { id: 7 } },
    });
    const items = [{ type: 'page', title: 't' }];
    expect(replayPlan(entry({ jobId: `w${FP}`, stage: 'write', data: { crawlId: 'c', url: 'https://a.test/p/1', items } }), 'c')).toEqual({
      stage: 'write',
      id: `w${FP}`,
      job: { crawlId: 'c', url: 'https://a.test/p/1', items },
    });
    expect(replayPlan(entry({ jobId: 'by-hand-1', url: '' }), 'c')).toBeUndefined();
    expect(replayPlan(entry({ url: 'not a url', data: { url: 42 } }), 'c')).toBeUndefined();
  });
});

test("a host's queue keeps a request without the host's origin, which the take writes out again", () => {
  expect(queuedRequest('0 http://a.test/x?y', 'a.test')).toBe('0 ~/x?y');
  expect(queuedRequest('2 https://a.test/\n{"r":"https://b.test/"}', 'a.test')).toBe('2 ^/\n{"r":"https://b.test/"}');
  // Another host's URL, or one with a port, as it is.
  expect(queuedRequest('0 http://a.test:8080/x', 'a.test')).toBe('0 http://a.test:8080/x');
  expect(queuedRequest('0 http://a.test.evil/x', 'a.test')).toBe('0 http://a.test.evil/x');
});
