import { readFileSync, writeFileSync, appendFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NonRetryableError, validateSpider } from '@crawlfleet/core';
import { Batcher, FileSink, ItemsRejectedError, castItem, contentHash, csvColumns, csvFormat, documentId, fieldSchemaType, isDocumentFault, itemModelName, itemSchema, jsonlFormat } from '@crawlfleet/storage';

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

describe('the mongoose schema of an item rule', () => {
  const rule = (fields: Record<string, object>, key?: string) => validateSpider({ name: 's', items: [{ type: 'book', ...(key ? { key } : {}), fields: { upc: { css: 'u' }, ...fields } }] }).items[0]!;
  const book = rule(
    { title: { css: 't' }, price: { css: 'p', type: 'number' }, pages: { css: 'n', type: 'integer' }, inStock: { css: 's', type: 'boolean' }, tags: { css: 'g', all: true }, sizes: { css: 'z', all: true, type: 'integer' } },
    'upc',
  );
  const schema = itemSchema(book);
  const instance = (path: string) => schema.path(path)?.instance;
  const element = (path: string) => (schema.path(path) as unknown as { caster?: { instance: string } }).caster?.instance;

  test('each field typed by its rule; `all` makes an array of that type', () => {
    expect([instance('upc'), instance('title'), instance('price'), instance('pages'), instance('inStock')]).toEqual(['String', 'String', 'Number', 'Number', 'Boolean']);
    expect([instance('tags'), element('tags'), instance('sizes'), element('sizes')]).toEqual(['Array', 'String', 'Array', 'Number']);
    expect(fieldSchemaType({})).toEqual({ type: String });
    expect(fieldSchemaType({ type: 'boolean', all: true })).toEqual([{ type: Boolean }]);
  });

  test('the fields of every item, as stored now (fetchedAt the fetcher\'s ISO string), and the store\'s bookkeeping', () => {
    expect(['type', 'url', 'spider', 'crawlId', 'fetchedAt'].map(instance)).toEqual(['String', 'String', 'String', 'String', 'String']);
    expect(['_id', 'firstSeenAt', 'lastSeenAt', 'changedAt', 'changes', 'contentHash'].map(instance)).toEqual(['Mixed', 'Date', 'Date', 'Date', 'Number', 'String']);
    expect(Object.keys(schema.paths).sort()).toEqual(
      ['_id', 'changedAt', 'changes', 'contentHash', 'crawlId', 'fetchedAt', 'firstSeenAt', 'inStock', 'lastSeenAt', 'pages', 'price', 'sizes', 'spider', 'tags', 'title', 'type', 'upc', 'url'].sort(),
    );
  });

  test('a unique index on the key field (url by default), built at open, not per write; strict; the type\'s collection', () => {
    expect(schema.indexes()).toEqual([[{ upc: 1 }, expect.objectContaining({ unique: true, name: 'upc_unique' })]]);
    expect(itemSchema(rule({})).indexes()).toEqual([[{ url: 1 }, expect.objectContaining({ unique: true, name: 'url_unique' })]]);
    expect([schema.get('strict'), schema.get('autoIndex'), schema.get('collection'), schema.get('versionKey')]).toEqual(['throw', false, 'book', false]);
  });

  test('a field named like the store\'s bookkeeping is a clear error, not a silent overwrite', () => {
    expect(() => itemSchema(rule({ changes: { css: 'c' } }))).toThrow(NonRetryableError);
    expect(() => itemSchema(rule({ changes: { css: 'c' } }))).toThrow(/field "changes" has a name the MongoDB store keeps for itself/);
  });

  test('one model per rule shape: the same fields and key share a name, other types of a field do not', () => {
    expect(itemModelName(rule({ price: { css: 'p', type: 'number' } }))).toBe(itemModelName(rule({ price: { css: 'other', type: 'number' } })));
    expect(itemModelName(rule({ price: { css: 'p', type: 'number' } }))).not.toBe(itemModelName(rule({ price: { css: 'p' } })));
    expect(itemModelName(rule({}, 'upc'))).not.toBe(itemModelName(rule({})));
  });

  test('castItem: mongoose casts each value to its field\'s type, keeps null, and refuses what does not fit, naming the field', () => {
    const base = { type: 'book', url: 'http://h/1', upc: 'u1', spider: 's', crawlId: 'c', fetchedAt: '2026-12-03T00:00:00.000Z' };
    expect(castItem(schema, { ...base, title: 7, price: '12.50', pages: '300', inStock: 'true', tags: ['a', 2], sizes: ['1', 2] })).toEqual({
      doc: { ...base, title: '7', price: 12.5, pages: 300, inStock: true, tags: ['a', '2'], sizes: [1, 2] },
    });
    expect(castItem(schema, { ...base, price: null, tags: [] }).doc).toEqual({ ...base, price: null, tags: [] });
    expect(castItem(schema, { ...base, price: 'abc' }).reason).toBe(
      'the item does not fit the schema of type "book": field "price": Cast to Number failed for value "abc" (type string) at path "price"',
    );
    expect(castItem(schema, { ...base, pages: 3.5, inStock: 'maybe' }).reason).toMatch(/field "pages": .*3\.5 is not an integer; field "inStock": Cast to Boolean failed/);
    expect(castItem(schema, { ...base, sizes: [1, 2.5] }).reason).toMatch(/field "sizes": .*2\.5 is not an integer/);
    expect(castItem(schema, { ...base, colour: 'red' }).reason).toMatch(/field "colour" is not in the schema \(strict\)/);
    // The store's own fields never come from an item.
    expect(castItem(schema, { ...base, changes: 5 }).reason).toMatch(/field "changes" is not in the schema/);
  });
});
