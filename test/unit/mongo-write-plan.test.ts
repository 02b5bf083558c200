import { planWrites } from '@crawlfleet/storage';

// planWrites sorts the latest item of each key into the three kinds of write a MongoSink flush makes.
describe('planWrites', () => {
  const item = (crawlId: string, fetchedAt: string) => ({ type: 'product', url: 'u', crawlId, fetchedAt });

  it('inserts items not stored, and items stored without a content hash', () => {
    const plan = planWrites([{ item: item('c', 't') }, { item: item('c', 't') }], ['a', 'b'], ['h1', 'h2'], new Map([['b', undefined]]));
    expect(plan).toEqual({ inserts: [0, 1], unchanged: new Map(), changed: [] });
  });

  it('updates items whose stored hash differs', () => {
    const plan = planWrites(
      [{ item: item('c', 't') }, { item: item('c', 't') }],
      [1, 2],
      ['h1', 'h2'],
      new Map<string | number, string | undefined>([
        [1, 'old'],
        [2, 'h2'],
      ]),
    );
    expect(plan.inserts).toEqual([]);
    expect(plan.changed).toEqual([0]);
    expect([...plan.unchanged]).toEqual([['c\u0001t', [1]]]);
  });

  it('groups unchanged items by crawl and fetch time, in order of first appearance', () => {
    const latest = [{ item: item('c1', 't1') }, { item: item('c1', 't2') }, { item: item('c1', 't1') }, { item: item('c2', 't1') }, { item: item('c1', 't2') }];
    const ids = ['a', 'b', 'c', 'd', 'e'];
    const hashes = ['ha', 'hb', 'hc', 'hd', 'he'];
    const plan = planWrites(latest, ids, hashes, new Map(ids.map((id, n) => [id, hashes[n]])));
    expect([...plan.unchanged]).toEqual([
      ['c1\u0001t1', [0, 2]],
      ['c1\u0001t2', [1, 4]],
      ['c2\u0001t1', [3]],
    ]);
    expect(plan.inserts).toEqual([]);
    expect(plan.changed).toEqual([]);
  });

  it('mixes the three kinds, keeping the order of the batch in each', () => {
    const latest = [0, 1, 2, 3, 4].map(() => ({ item: item('c', 't') }));
    const stored = new Map<string | number, string | undefined>([
      ['b', 'hb'],
      ['c', 'other'],
      ['e', 'other'],
    ]);
    const plan = planWrites(latest, ['a', 'b', 'c', 'd', 'e'], ['ha', 'hb', 'hc', 'hd', 'he'], stored);
    expect(plan).toEqual({ inserts: [0, 3], unchanged: new Map([['c\u0001t', [1]]]), changed: [2, 4] });
  });

  it('plans nothing for no items', () => {
    expect(planWrites([], [], [], new Map())).toEqual({ inserts: [], unchanged: new Map(), changed: [] });
  });
});
