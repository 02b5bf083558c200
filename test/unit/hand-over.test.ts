import { type HandOver, inJobPartition } from '@crawlfleet/runtime';
import { partitionOfHost } from '@crawlfleet/core';

const partitionOf = (url: string, parts: number) => partitionOfHost(new URL(url).host, parts);

// Issue 28, A1: a URL's jobs keep to the partition of the URL it was admitted under in every stage.
// The browser and got now follow only same-origin redirects in place, so a page no longer lands on
// another host; this keeps the hand-over right should any path ever give a final URL elsewhere.
describe('a hand-over keeps to the partition of the job that hands it over', () => {
  const requested = 'http://shop.test/app/go';
  const landed = 'http://www.shop.test/app/landed.html';
  const handOver = (url: string): HandOver => ({ stage: 'write', id: 'w-1', data: { crawlId: 'c', url, items: [] } as unknown as HandOver['data'], opts: {} });

  test('a hand-over named for the final URL on another host is renamed for the requested URL, in its partition', () => {
    expect(partitionOf(requested, 16)).not.toBe(partitionOf(landed, 16));
    const given = handOver(landed);
    const added = inJobPartition(given, requested);
    expect(added?.data.url).toBe(requested);
    expect(partitionOf(added!.data.url, 16)).toBe(partitionOf(requested, 16));
    // the rest of the job is the same, and the given one is not changed
    expect(added).toMatchObject({ stage: 'write', id: 'w-1', opts: {} });
    expect(given.data.url).toBe(landed);
  });

  test('a hand-over for the job URL, or none, is passed on as it is', () => {
    const same = handOver(requested);
    expect(inJobPartition(same, requested)).toBe(same);
    expect(inJobPartition(undefined, requested)).toBeUndefined();
  });
});
