import { hasRoomToFeed, isDoneWithWork, mayBeDone, needsFullCheck, pendingOfLiveCrawls, progressSignature, progressVerdict, totalPending } from '@crawlfleet/runtime';

// The pure decisions of one reconciler round (packages/runtime/src/reconciler.ts).
const pending = (fetch: number, parse = 0, write = 0) => ({ fetch, parse, write });

describe('a reconciler round decides', () => {
  test('pending of live crawls counts the running and paused crawls only', () => {
    const crawls = [
      { state: 'running', pending: pending(2, 1) },
      { state: 'paused', pending: pending(3) },
      { state: 'done', pending: pending(5) },
      { state: null, pending: pending(7) },
      { state: 'cancelled', pending: pending(11) },
    ];
    expect(pendingOfLiveCrawls(crawls, 'fetch')).toBe(5);
    expect(pendingOfLiveCrawls(crawls, 'parse')).toBe(1);
    expect(pendingOfLiveCrawls(crawls, 'write')).toBe(0);
    expect(pendingOfLiveCrawls([], 'fetch')).toBe(0);
  });

  test.each([
    ['done, nothing left', 'done', pending(0), [0, 0], false],
    ['done, a job pending', 'done', pending(0, 0, 1), [0, 0], true],
    ['done, a URL waiting', 'done', pending(0), [0, 1], true],
    ['running with work', 'running', pending(1), [1, 0], false],
    ['paused with work', 'paused', pending(1), [1], false],
  ])('done with work: %s', (_what, state, p, frontier, expected) => {
    expect(isDoneWithWork({ state, pending: p, frontier })).toBe(expected);
  });

  test.each([
    ['a partition with URLs and room', [3, 0], [1, 9], 2, true],
    ['a partition with URLs but a full window', [3, 0], [2, 0], 2, false],
    ['room only where no URL waits', [0, 3], [0, 2], 2, false],
    ['no partition', [], [], 2, false],
  ])('room to feed: %s', (_what, frontier, pendingFetch, window, expected) => {
    expect(hasRoomToFeed({ frontier, pendingFetch }, window)).toBe(expected);
  });

  test('total pending adds every stage', () => {
    expect(totalPending({ pending: pending(1, 2, 4) })).toBe(7);
    expect(totalPending({ pending: pending(0) })).toBe(0);
  });

  test.each([
    [[0, 0], 0, true],
    [[0, 1], 0, false],
    [[0], 1, false],
    [[], 0, true],
  ])('may be done: frontier %j, seeding %d', (frontier, seeding, expected) => {
    expect(mayBeDone({ frontier, seeding })).toBe(expected);
  });

  test('the progress signature is the pending sizes and counters as JSON', () => {
    expect(progressSignature({ pending: pending(1, 2, 3), counters: [{ fetched: '4' }] })).toBe('[{"fetch":1,"parse":2,"write":3},[{"fetched":"4"}]]');
  });

  test.each([
    ['nothing recorded', null, 'S', 10_000, { stuck: false, changed: true }],
    ['another signature', 'T|0', 'S', 10_000, { stuck: false, changed: true }],
    ['the same, within the grace period', 'S|5000', 'S', 10_000, { stuck: false, changed: false }],
    ['the same, for the grace period', 'S|4000', 'S', 10_000, { stuck: true, changed: false }],
    ['a signature holding | itself', 'a|b|4000', 'a|b', 10_000, { stuck: true, changed: false }],
  ])('progress: %s', (_what, previous, signature, now, expected) => {
    expect(progressVerdict(previous, signature, now, 6000)).toEqual(expected);
  });

  test.each([
    ['quiet', pending(1), 0, false, [], false],
    ['stuck', pending(1), 0, true, [], true],
    ['suspects to settle', pending(1), 2, false, [], true],
    ['pending in a short stage', pending(0, 1), 0, false, ['parse'], true],
    ['a short stage it has nothing pending in', pending(1), 0, false, ['parse'], false],
  ] as const)('a full check: %s', (_what, p, suspects, stuck, short, expected) => {
    expect(needsFullCheck({ pending: p, suspects }, stuck, new Set(short))).toBe(expected);
  });
});
