// The chaos suite's verdict (test/chaos/verify.mjs): the harness must name each kind of damage.
import { verify } from '../chaos/verify.mjs';

const truth = {
  pages: new Map([
    ['http://a.test/1.html', 'One'],
    ['http://a.test/2.html', 'Two'],
    ['http://a.test/3.html', 'Three'],
  ]),
  dead: new Set(['http://a.test/gone.html']),
};
const exactCounters = { seen: 4, fetched: 4, parsed: 3, items: 3, written: 3, failed: 1, invalid: 0 };
const emptySets: Record<string, Record<string, string[]>> = { pending: { fetch: [], parse: [], write: [] }, active: { fetch: [], parse: [], write: [] } };
const exactRun = () => ({
  truth,
  stored: [...truth.pages].map(([url, title]) => ({ url, title })),
  deadLetters: [{ url: 'http://a.test/gone.html', stage: 'fetch', code: 'ERR_HTTP_STATUS', reason: 'HTTP 404' }],
  endedDone: true,
  finalState: 'done',
  countersAtDone: { ...exactCounters },
  countersFinal: { ...exactCounters },
  leftovers: emptySets,
  waitExit: 0,
});

describe('the chaos verdict', () => {
  test('the exact result passes', () => {
    const found = verify(exactRun());
    expect(found.problems).toEqual([]);
    expect(found.pass).toBe(true);
  });

  test('a missing page, a duplicate, a wrong title, an extra dead letter, a counter off, a late counter and a leftover id each fail, named', () => {
    const run = exactRun();
    run.stored = [
      { url: 'http://a.test/1.html', title: 'One' },
      { url: 'http://a.test/1.html', title: 'One' },
      { url: 'http://a.test/2.html', title: 'Deux' },
    ];
    run.deadLetters.push({ url: 'http://a.test/3.html', stage: 'write', code: 'ERR_X', reason: 'boom' });
    run.countersFinal = { ...exactCounters, written: 5 };
    run.leftovers = { ...emptySets, pending: { fetch: [], parse: ['p1'], write: [] } };
    const found = verify(run);
    expect(found.pass).toBe(false);
    expect(found.missingSample).toEqual(['http://a.test/3.html']);
    expect(found.duplicatesSample).toEqual([{ url: 'http://a.test/1.html', copies: 2 }]);
    expect(found.wrongTitlesSample).toEqual([{ url: 'http://a.test/2.html', expected: 'Two', stored: ['Deux'] }]);
    expect(found.problems).toEqual([
      '1 pages missing from MongoDB',
      '1 pages stored more than once',
      '1 pages stored with a wrong title',
      '1 unexpected dead letters',
      'counter written 5 (expected 3)',
      'counters moved after done: written 3→5',
      'sets not empty after done: pending:parse (1)',
    ]);
  });

  test('a crawl that never ended fails however right its items are', () => {
    const found = verify({ ...exactRun(), endedDone: false, finalState: 'running', waitExit: null });
    expect(found.problems).toEqual(['the crawl did not end done (state running)']);
  });

  test('WARC output: one response per fetched URL (the 404 too) and every file valid pass; a missing, doubled or stray capture, a bad file and a wrong archived count fail, named', () => {
    const fetched = [...truth.pages.keys(), ...truth.dead].map((uri) => ({ uri }));
    const archivedCounters = { ...exactCounters, archived: 4 };
    const exact = verify({ ...exactRun(), countersAtDone: archivedCounters, countersFinal: archivedCounters, warc: { captures: fetched, invalidFiles: [] } });
    expect(exact.problems).toEqual([]);
    expect(exact.warc).toMatchObject({ captures: 4, missing: 0, duplicates: 0, unexpected: 0 });

    const damaged = verify({
      ...exactRun(),
      countersAtDone: archivedCounters,
      countersFinal: { ...archivedCounters, archived: 5 },
      warc: { captures: [...fetched.slice(1), { uri: 'http://a.test/2.html' }, { uri: 'http://a.test/other.html' }], invalidFiles: [{ file: 'c-00002.warc.gz', reason: 'truncated' }] },
    });
    expect(damaged.warc).toMatchObject({ missingSample: ['http://a.test/1.html'], duplicatesSample: [{ url: 'http://a.test/2.html', copies: 2 }], unexpectedSample: ['http://a.test/other.html'] });
    expect(damaged.problems).toEqual([
      'counter archived 5 (expected 4)',
      'counters moved after done: archived 4→5',
      '1 WARC files invalid (warcio check)',
      '1 fetched URLs without a WARC response',
      '1 URLs with more than one WARC response',
      '1 WARC responses for URLs not fetched',
    ]);
  });
});
