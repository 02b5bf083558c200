// The recrawl's decisions (pure): what a visit found, the next interval, the URL's record, what is due.
import { validateSpider } from '@crawlfleet/core';
import { conditionalHeaders, isDue, knownPageOf, nextIntervalS, pageRecordAfter, visitOutcome } from '@crawlfleet/crawl';
import { decodeRequest, encodeRequest } from '@crawlfleet/frontier';

const settings = { intervalHours: 24, minIntervalHours: 6, maxIntervalHours: 96 };
const H = 3600;
const known = { etag: '"v1"', lastModified: 'Tue, 01 Dec 2026 10:00:00 GMT', hash: 'a'.repeat(40), changedAt: '2026-11-01T00:00:00.000Z', intervalS: 24 * H };

describe('recrawl decisions', () => {
  test('a visit is new, a 304, unchanged (the same body hash) or changed', () => {
    expect(visitOutcome(undefined, 200, 'b'.repeat(40))).toBe('new');
    expect(visitOutcome(known, 304, undefined)).toBe('notModified');
    expect(visitOutcome(known, 200, 'a'.repeat(40))).toBe('unchanged');
    expect(visitOutcome(known, 200, 'b'.repeat(40))).toBe('changed');
  });

  test('the interval halves when the page changed and doubles when it did not, within the bounds', () => {
    expect(nextIntervalS('new', undefined, settings)).toBe(24 * H);
    expect(nextIntervalS('changed', 24 * H, settings)).toBe(12 * H);
    expect(nextIntervalS('changed', 8 * H, settings)).toBe(6 * H);
    expect(nextIntervalS('unchanged', 24 * H, settings)).toBe(48 * H);
    expect(nextIntervalS('notModified', 72 * H, settings)).toBe(96 * H);
  });

  test("a 304 keeps the last visit's hash, validators and change date, and takes a new ETag it sends", () => {
    const at = new Date('2026-12-05T08:00:00.000Z');
    const { record, outcome } = pageRecordAfter({ url: 'http://a.test/p', depth: 2, status: 304, at }, known, settings);
    expect(outcome).toBe('notModified');
    expect(record).toEqual({
      url: 'http://a.test/p',
      depth: 2,
      status: 200,
      etag: '"v1"',
      lastModified: known.lastModified,
      hash: known.hash,
      lastSeenAt: at.toISOString(),
      changedAt: known.changedAt,
      intervalS: 48 * H,
      dueAt: '2026-12-07T08:00:00.000Z',
    });
    expect(pageRecordAfter({ url: 'http://a.test/p', depth: 2, status: 304, etag: '"v2"', at }, known, settings).record.etag).toBe('"v2"');
  });

  test('a changed page records its new hash and validators, changed now; a page without validators keeps none', () => {
    const at = new Date('2026-12-05T08:00:00.000Z');
    const { record } = pageRecordAfter({ url: 'http://a.test/p', depth: 0, status: 200, hash: 'c'.repeat(40), at, lastmod: '2026-12-04T00:00:00.000Z' }, known, settings);
    expect(record).toMatchObject({ hash: 'c'.repeat(40), changedAt: at.toISOString(), intervalS: 12 * H, lastmod: '2026-12-04T00:00:00.000Z' });
    expect(record.etag).toBeUndefined();
    expect(knownPageOf(record)).toEqual({ hash: 'c'.repeat(40), changedAt: at.toISOString(), intervalS: 12 * H });
  });

  test('due: the interval passed, or a sitemap lastmod newer than the last visit (an older one holds it back)', () => {
    const record = pageRecordAfter({ url: 'http://a.test/p', depth: 0, status: 200, hash: 'c'.repeat(40), at: new Date('2026-12-01T00:00:00Z') }, undefined, settings).record;
    expect(isDue(record, new Date('2026-12-01T23:00:00Z'))).toBe(false);
    expect(isDue(record, new Date('2026-12-02T00:00:00Z'))).toBe(true);
    expect(isDue(record, new Date('2026-12-01T01:00:00Z'), '2026-12-01T00:30:00.000Z')).toBe(true);
    expect(isDue(record, new Date('2026-12-09T00:00:00Z'), '2026-11-30T00:00:00.000Z')).toBe(false);
  });

  test('conditional headers carry the validators the last visit had', () => {
    expect(conditionalHeaders(known)).toEqual({ 'if-none-match': '"v1"', 'if-modified-since': known.lastModified });
    expect(conditionalHeaders({ ...known, etag: undefined })).toEqual({ 'if-modified-since': known.lastModified });
    expect(conditionalHeaders(undefined)).toEqual({});
  });

  test('what the last visit learnt travels through the frontier to the fetch job', () => {
    const request = { url: 'http://a.test/p', depth: 1, known };
    expect(decodeRequest(encodeRequest(request))).toEqual(request);
  });

  test('the spider setting: defaults, and bounds that must hold', () => {
    expect(validateSpider({ name: 's', startUrls: ['http://a.test/'], recrawl: {} }).recrawl).toEqual({ intervalHours: 24, minIntervalHours: 1, maxIntervalHours: 720 });
    expect(() => validateSpider({ name: 's', startUrls: ['http://a.test/'], recrawl: { intervalHours: 2, minIntervalHours: 3 } })).toThrow(
      /recrawl: minIntervalHours <= intervalHours <= maxIntervalHours/,
    );
  });
});
