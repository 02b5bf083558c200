import { readFileSync, writeFileSync, appendFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Batcher, FileSink, ItemsRejectedError, contentHash, csvColumns, csvFormat, documentId, isDocumentFault, jsonlFormat } from '@crawlfleet/storage';

describe('Batcher', () => {
  test('flushes at maxItems or after maxWaitMs, and settles each caller with its flush', async () => {
    const flushed: number[][] = [];
    const b = new Batcher<number>(async (batch) => void flushed.push(batch), { maxItems: 3, maxWaitMs: 20 });
    await Promise.all([b.add([1]), b.add([2, 3])]);
    expect(flushed).toEqual([[1, 2, 3]]);
    await b.add([4]);
    expect(flushed).toEqual([[1, 2, 3], [4]]);
  });

  test('items the store refuses reject only their own caller, with the reasons', async () => {
    const b = new Batcher<number>(async (batch) => batch.map((n) => (n === 13 ? 'unlucky' : undefined)), { maxItems: 4, maxWaitMs: 10 });
    const results = await Promise.allSettled([b.add([1, 2]), b.add([13]), b.add([4])]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const rejected = (results[1] as PromiseRejectedResult).reason as ItemsRejectedError;
    expect(rejected).toBeInstanceOf(ItemsRejectedError);
    expect(rejected.reasons).toEqual(['unlucky']);
  });

  test('a failed flush rejects every caller in it', async () => {
    const b = new Batcher<number>(async () => {
      throw new Error('disk full');
    }, { maxItems: 2, maxWaitMs: 10 });
    await expect(Promise.all([b.add([1]), b.add([2])])).rejects.toThrow('disk full');
  });
});

describe('FileSink', () => {
  const keyFields = { book: 'upc' };
  test('writes each item once across re-runs, and cuts a torn last line on open', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'sink-')), 'out', 'items.jsonl');
    const sink = await FileSink.open(path, jsonlFormat, keyFields);
    await sink.write([{ type: 'book', upc: 'a', n: 1 }, { type: 'book', upc: 'b', n: 2 }, { type: 'book', upc: 'a', n: 3 }]);
    await sink.close();
    appendFileSync(path, '{"type":"book","upc":"c"'); // a crash mid-write
    const again = await FileSink.open(path, jsonlFormat, keyFields);
    await again.write([{ type: 'book', upc: 'b', n: 2 }, { type: 'book', upc: 'c', n: 4 }]);
    await again.close();
    expect(readFileSync(path, 'utf8')).toBe('{"type":"book","upc":"a","n":1}\n{"type":"book","upc":"b","n":2}\n{"type":"book","upc":"c","n":4}\n');
  });

  test('CSV: header once, RFC 4180 quoting, arrays joined with |, resumable', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'sink-')), 'items.csv');
    const format = csvFormat(csvColumns(['title', 'tags']));
    const sink = await FileSink.open(path, format, {});
    await sink.write([{ type: 'p', url: 'http://a/1', title: 'He said "hi", twice\nthen left', tags: ['x', 'y'], spider: 's', crawlId: 'c', fetchedAt: 't' }]);
    await sink.close();
    const resumed = await FileSink.open(path, format, {});
    await resumed.write([{ type: 'p', url: 'http://a/1', title: 'dup' }, { type: 'p', url: 'http://a/2', title: null, tags: [] }]);
    await resumed.close();
    expect(readFileSync(path, 'utf8')).toBe(
      'type,url,title,tags,spider,crawlId,fetchedAt\r\np,http://a/1,"He said ""hi"", twice\nthen left",x|y,s,c,t\r\np,http://a/2,,,,,\r\n',
    );
  });

  test('an unwritable path is an error, not a hang', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sink-'));
    writeFileSync(join(dir, 'file'), '');
    await expect(FileSink.open(join(dir, 'file', 'items.jsonl'), jsonlFormat, {})).rejects.toThrow();
  });
});

describe('item store decisions', () => {
  test('the content hash ignores crawlId, fetchedAt and spider, and key order', () => {
    const a = { type: 'book', upc: 'x', price: 1, crawlId: 'c1', fetchedAt: 't1', spider: 's' };
    const b = { price: 1, upc: 'x', type: 'book', crawlId: 'c2', fetchedAt: 't2', spider: 's' };
    expect(contentHash(a)).toBe(contentHash(b));
    expect(contentHash({ ...a, price: 2 })).not.toBe(contentHash(a));
  });
  test('only a document\'s own fault refuses it; a shutdown or failover error retries the whole batch', () => {
    expect([2, 52, 121, 10334].every(isDocumentFault)).toBe(true);
    // ShutdownInProgress, InterruptedAtShutdown, NotWritablePrimary, no code at all
    expect([91, 11600, 10107, undefined].some(isDocumentFault)).toBe(false);
  });
  test('the document id is the key value', () => {
    expect(documentId('abc')).toBe('abc');
    expect(documentId(7)).toBe(7);
    expect(documentId(null)).toBe('null');
    expect(documentId(['a', 1])).toBe('["a",1]');
  });
});
