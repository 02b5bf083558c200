import { readFileSync, writeFileSync, appendFileSync, mkdtempSync, statSync, existsSync, utimesSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { NonRetryableError, validateSpider } from '@crawlfleet/core';
import {
  Batcher,
  FileLock,
  FileSink,
  ItemsRejectedError,
  RecordSplitter,
  SinkBusyError,
  castItem,
  itemIdentity,
  lockIsStale,
  parseStat,
  processIsGone,
  readProcessIdentity,
  statusNsPids,
  type IdentityIndex,
  type IndexState,
  type SinkIO,
  contentHash,
  surtKey,
  csvColumns,
  csvFormat,
  documentId,
  fieldSchemaType,
  isDocumentFault,
  itemModelName,
  itemSchema,
  jsonlFormat,
} from '@crawlfleet/storage';

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
    const b = new Batcher<number>(
      async () => {
        throw new Error('disk full');
      },
      { maxItems: 2, maxWaitMs: 10 },
    );
    await expect(Promise.all([b.add([1]), b.add([2])])).rejects.toThrow('disk full');
  });
});

/** An index in this process, for the sink's logic without Redis; the fleet's is RedisIdentityIndex (test/e2e/file-sink). */
class MemoryIndex implements IdentityIndex {
  readonly digests = new Set<string>();
  recorded: IndexState | undefined;
  async state() {
    return this.recorded;
  }
  async lookup(digests: Buffer[]) {
    return { state: this.recorded, held: digests.map((d) => this.digests.has(d.toString('hex'))) };
  }
  async record(digests: Buffer[], state?: IndexState) {
    for (const d of digests) this.digests.add(d.toString('hex'));
    if (state) this.recorded = state;
  }
  async clear() {
    this.recorded = undefined;
    this.digests.clear();
  }
}

describe('FileSink', () => {
  const keyFields = { book: 'upc' };
  test('writes each item once across re-runs, and cuts a torn last line on open', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'sink-')), 'out', 'items.jsonl');
    const index = new MemoryIndex();
    const sink = await FileSink.open(path, jsonlFormat, keyFields, { index });
    await sink.write([
      { type: 'book', upc: 'a', n: 1 },
      { type: 'book', upc: 'b', n: 2 },
      { type: 'book', upc: 'a', n: 3 },
    ]);
    await sink.close();
    appendFileSync(path, '{"type":"book","upc":"c"'); // a crash mid-write
    const again = await FileSink.open(path, jsonlFormat, keyFields, { index });
    await again.write([
      { type: 'book', upc: 'b', n: 2 },
      { type: 'book', upc: 'c', n: 4 },
    ]);
    await again.close();
    expect(readFileSync(path, 'utf8')).toBe('{"type":"book","upc":"a","n":1}\n{"type":"book","upc":"b","n":2}\n{"type":"book","upc":"c","n":4}\n');
  });

  test('CSV: header once, RFC 4180 quoting, arrays joined with |, resumable', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'sink-')), 'items.csv');
    const format = csvFormat(csvColumns(['title', 'tags']));
    const sink = await FileSink.open(path, format, {}, { index: new MemoryIndex() });
    await sink.write([{ type: 'p', url: 'http://a/1', title: 'He said "hi", twice\nthen left', tags: ['x', 'y'], spider: 's', crawlId: 'c', fetchedAt: 't' }]);
    await sink.close();
    // a new index: everything is read back from the file, the quoted newline included
    const resumed = await FileSink.open(path, format, {}, { index: new MemoryIndex(), chunkBytes: 7 });
    await resumed.write([
      { type: 'p', url: 'http://a/1', title: 'dup' },
      { type: 'p', url: 'http://a/2', title: null, tags: [] },
    ]);
    await resumed.close();
    expect(readFileSync(path, 'utf8')).toBe('type,url,title,tags,spider,crawlId,fetchedAt\r\np,http://a/1,"He said ""hi"", twice\nthen left",x|y,s,c,t\r\np,http://a/2,,,,,\r\n');
  });

  test('CSV: numeric keys are still known after a reopen (the file gives them back as text)', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'sink-')), 'items.csv');
    const format = csvFormat(csvColumns(['upc', 'tags']));
    const first = await FileSink.open(path, format, { book: 'upc', list: 'tags' }, { index: new MemoryIndex() });
    await first.write([
      { type: 'book', url: 'http://a/1', upc: 1001 },
      { type: 'list', url: 'http://a/2', tags: [7, 'x'] },
    ]);
    await first.close();
    const again = await FileSink.open(path, format, { book: 'upc', list: 'tags' }, { index: new MemoryIndex() });
    await again.write([
      { type: 'book', url: 'http://a/1', upc: 1001 },
      { type: 'list', url: 'http://a/2', tags: [7, 'x'] },
      { type: 'book', url: 'http://a/3', upc: 1002 },
    ]);
    await again.close();
    expect(readFileSync(path, 'utf8').split('\r\n').filter(Boolean)).toEqual([
      'type,url,upc,tags,spider,crawlId,fetchedAt',
      'book,http://a/1,1001,,,,',
      'list,http://a/2,,7|x,,,',
      'book,http://a/3,1002,,,,',
    ]);
  });

  test('identities are the same whether a key went through JSON or CSV', () => {
    expect(itemIdentity({ type: 'b', upc: 12 }, { b: 'upc' })).toBe(itemIdentity({ type: 'b', upc: '12' }, { b: 'upc' }));
    expect(itemIdentity({ type: 'b', upc: ['a', 2] }, { b: 'upc' })).toBe(itemIdentity({ type: 'b', upc: 'a|2' }, { b: 'upc' }));
    expect(itemIdentity({ type: 'b' }, { b: 'upc' })).toBe(itemIdentity({ type: 'b', upc: '' }, { b: 'upc' }));
    expect(itemIdentity({ type: 'b', upc: 12 }, { b: 'upc' })).not.toBe(itemIdentity({ type: 'b', upc: 13 }, { b: 'upc' }));
  });

  test('the index is rebuilt from a file many times the read chunk, in chunks, and knows every record', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'sink-')), 'items.jsonl');
    const items = Array.from({ length: 300 }, (_, i) => ({ type: 'book', upc: `u${i}`, title: 'é'.repeat(i % 40) }));
    const first = await FileSink.open(path, jsonlFormat, keyFields, { index: new MemoryIndex() });
    await first.write(items);
    await first.close();
    const size = statSync(path).size;
    const reads: number[] = [];
    const io: SinkIO = { read: async (h, buffer, position) => (await h.read(buffer, 0, buffer.length, position)).bytesRead, write: async (h, b, p) => (await h.write(b, 0, b.length, p)).bytesWritten };
    const counting: SinkIO = {
      ...io,
      read: async (h, buffer, position) => {
        reads.push(buffer.length);
        return io.read(h, buffer, position);
      },
    };
    const fresh = new MemoryIndex();
    const again = await FileSink.open(path, jsonlFormat, keyFields, { index: fresh, chunkBytes: 64, io: counting });
    expect(size).toBeGreaterThan(64 * 100);
    expect(Math.max(...reads.slice(0, -1))).toBeLessThanOrEqual(64); // the last read is the tail digest's
    expect(fresh.digests.size).toBe(300);
    await again.write([...items].reverse());
    await again.close();
    expect(statSync(path).size).toBe(size);
  });

  test('a failed append (a full disk) leaves no torn line, and the next batch is whole', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'sink-')), 'items.jsonl');
    let failNext = false;
    const io: SinkIO = {
      read: async (h, buffer, position) => (await h.read(buffer, 0, buffer.length, position)).bytesRead,
      write: async (h, buffer, position) => {
        if (!failNext) return (await h.write(buffer, 0, buffer.length, position)).bytesWritten;
        failNext = false;
        await h.write(buffer, 0, Math.floor(buffer.length / 2) + 3, position); // part of the text reached the disk
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      },
    };
    const sink = await FileSink.open(path, jsonlFormat, keyFields, { index: new MemoryIndex(), io, batch: { maxItems: 100, maxWaitMs: 5 } });
    await sink.write([{ type: 'book', upc: 'a' }]);
    failNext = true;
    await expect(
      sink.write([
        { type: 'book', upc: 'b' },
        { type: 'book', upc: 'c' },
      ]),
    ).rejects.toThrow('ENOSPC');
    expect(readFileSync(path, 'utf8')).toBe('{"type":"book","upc":"a"}\n');
    await sink.write([
      { type: 'book', upc: 'c' },
      { type: 'book', upc: 'd' },
    ]);
    await sink.write([
      { type: 'book', upc: 'b' },
      { type: 'book', upc: 'a' },
    ]); // the failed job again
    await sink.close();
    expect(readFileSync(path, 'utf8')).toBe(['a', 'c', 'd', 'b'].map((u) => `{"type":"book","upc":"${u}"}\n`).join(''));
  });

  test('a failed append whose cut fails too is cut before the next append', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'sink-')), 'items.jsonl');
    let failNext = false;
    const io: SinkIO = {
      read: async (h, buffer, position) => (await h.read(buffer, 0, buffer.length, position)).bytesRead,
      write: async (h, buffer, position) => {
        if (!failNext) return (await h.write(buffer, 0, buffer.length, position)).bytesWritten;
        failNext = false;
        await h.write(buffer, 0, buffer.length - 1, position);
        const truncate = h.truncate.bind(h);
        h.truncate = async () => {
          h.truncate = truncate; // the disk is back for the next batch
          throw new Error('EIO: the cut fails too');
        };
        throw new Error('EIO: write');
      },
    };
    const sink = await FileSink.open(path, jsonlFormat, keyFields, { index: new MemoryIndex(), io });
    failNext = true;
    await expect(sink.write([{ type: 'book', upc: 'a', title: 'long enough to tear' }])).rejects.toThrow('EIO: write');
    expect(readFileSync(path, 'utf8')).toBe('{"type":"book","upc":"a","title":"long enough to tear"}'); // torn, for now
    await sink.write([{ type: 'book', upc: 'b' }]);
    await sink.close();
    expect(readFileSync(path, 'utf8')).toBe('{"type":"book","upc":"b"}\n');
  });

  test('an unwritable path is an error, not a hang', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sink-'));
    writeFileSync(join(dir, 'file'), '');
    await expect(FileSink.open(join(dir, 'file', 'items.jsonl'), jsonlFormat, {}, { index: new MemoryIndex() })).rejects.toThrow();
  });
});

describe('RecordSplitter', () => {
  const split = (quoted: boolean, text: string, chunk: number) => {
    const bytes = Buffer.from(text);
    const splitter = new RecordSplitter(quoted, 10);
    const records = [];
    for (let i = 0; i < bytes.length; i += chunk) records.push(...splitter.push(bytes.subarray(i, i + chunk)));
    return { records, pending: splitter.pendingBytes };
  };
  test('records across chunk boundaries, with their file offsets; a torn rest is pending', () => {
    for (const chunk of [1, 2, 3, 100]) {
      expect(split(false, 'ab\nçd\n\nxy', chunk)).toEqual({
        records: [
          { text: 'ab\n', start: 10, end: 13 },
          { text: 'çd\n', start: 13, end: 17 },
          { text: '\n', start: 17, end: 18 },
        ],
        pending: 2,
      });
    }
  });
  test('CSV: a newline inside quotes does not end a record; an escaped quote does not end the quotes', () => {
    for (const chunk of [1, 4, 100]) {
      const { records, pending } = split(true, 'a,"x\n""y\n"\r\nb,"open\n', chunk);
      expect(records.map((r) => r.text)).toEqual(['a,"x\n""y\n"\r\n']);
      expect(pending).toBe(Buffer.byteLength('b,"open\n'));
    }
  });
});

describe('the file lock', () => {
  const boot = 'b00t';
  const me = { boot, pidNs: 'pid:[1]', pid: 7, startTicks: 500 };
  const here = { process: me, isGone: (p: { pid: number; startTicks: number }) => !((p.pid === 42 && p.startTicks === 100) || (p.pid === 7 && p.startTicks === 500)) };
  const owner = (pid: number, pidNs = 'pid:[1]', startTicks = 100, host = 'h1') => ({ pid, host, token: 't', since: '', process: { boot, pidNs, pid, startTicks } });
  test('stale when not renewed for staleMs, whoever the owner; sooner only when it is proven gone in this pid namespace of this boot', () => {
    expect(lockIsStale({ owner: owner(42), mtimeMs: 1000 }, 1500, 1000, here)).toBe(false);
    expect(lockIsStale({ owner: owner(43), mtimeMs: 1000 }, 1500, 1000, here)).toBe(true);
    expect(lockIsStale({ owner: owner(42, 'pid:[1]', 99), mtimeMs: 1000 }, 1500, 1000, here)).toBe(true); // the pid was reused
    // another pid namespace (a container with the same host name): its pids are not ours to look up
    expect(lockIsStale({ owner: owner(43, 'pid:[2]'), mtimeMs: 1000 }, 1500, 1000, here)).toBe(false);
    expect(lockIsStale({ owner: owner(7, 'pid:[2]', 1), mtimeMs: 1000 }, 1500, 1000, here)).toBe(false); // its pid 7 is not this pid 7
    expect(lockIsStale({ owner: owner(43, 'pid:[2]'), mtimeMs: 1000 }, 2001, 1000, here)).toBe(true);
    // another boot or machine, an owner that could not tell who it was, a file torn by its owner's death
    expect(lockIsStale({ owner: { ...owner(43), process: { ...owner(43).process, boot: 'other' } }, mtimeMs: 1000 }, 1500, 1000, here)).toBe(false);
    expect(lockIsStale({ owner: { pid: 43, host: 'h1', token: 't', since: '' }, mtimeMs: 1000 }, 1500, 1000, here)).toBe(false);
    expect(lockIsStale({ owner: owner(43), mtimeMs: 1000 }, 1500, 1000, { ...here, process: undefined })).toBe(false);
    expect(lockIsStale({ owner: undefined, mtimeMs: 1000 }, 1500, 1000, here)).toBe(false);
    // this very process: another sink of it holds the file
    expect(lockIsStale({ owner: owner(7, 'pid:[1]', 500), mtimeMs: 1000 }, 1500, 1000, here)).toBe(false);
  });

  test('/proc: a stat line read past a command name with spaces and parentheses; NSpid from the mount down', () => {
    const stat = '123 (a) b (c)) S 1 123 123 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 12345678 300';
    expect(parseStat(stat)).toEqual({ state: 'S', startTicks: 987654 });
    expect(parseStat('1 (x) Z 0 0')).toBeUndefined();
    expect(statusNsPids('Name:\tnode\nNSpid:\t4242\t1\nVmRSS: 1 kB\n')).toEqual([4242, 1]);
    expect(statusNsPids('Name:\tnode\n')).toEqual([]);
    const self = readProcessIdentity();
    if (self) {
      expect(self.pid).toBe(process.pid);
      expect(processIsGone(self)).toBe(false);
      expect(processIsGone({ ...self, startTicks: self.startTicks + 1 })).toBe(true);
      expect(processIsGone({ pid: 2 ** 22 + 7, startTicks: 1 })).toBe(true);
    }
  });

  test("one holder at a time; a dead owner's lock is taken at once when it ran in this pid namespace, else after staleMs; released on close", async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'lock-')), 'items.jsonl');
    const a = new FileLock(path, 60_000);
    const b = new FileLock(path, 60_000);
    expect(await a.tryAcquire()).toBe(true);
    expect(await b.tryAcquire()).toBe(false);
    expect(await a.holds()).toBe(true);
    expect(await b.describeOwner()).toMatch(new RegExp(`^pid ${process.pid} on ${hostname()} since `));
    await a.release();
    expect(await b.tryAcquire()).toBe(true);
    await b.release();
    const self = readProcessIdentity();
    if (self) {
      // a writer of this namespace killed with SIGKILL left its lock: its pid is gone
      writeFileSync(`${path}.lock`, JSON.stringify({ pid: 2 ** 22 + 7, host: hostname(), token: 'dead', since: '', process: { ...self, pid: 2 ** 22 + 7 } }));
      const c = new FileLock(path, 60_000);
      expect(await c.tryAcquire()).toBe(true);
      expect(JSON.parse(readFileSync(`${path}.lock`, 'utf8'))).toMatchObject({ pid: process.pid, process: self });
      await c.release();
      expect(existsSync(`${path}.lock`)).toBe(false);
    }
    // the same host name and a pid that is gone here, but no proof it ran here (a lock from another
    // pid namespace, or from a version that wrote none): held while renewed, taken once not renewed for staleMs
    for (const [token, record] of [
      ['ns', { process: { ...(self ?? { boot: 'b', startTicks: 1 }), pidNs: 'pid:[9]', pid: 1 } }],
      ['old', { started: 1 }],
    ] as const) {
      writeFileSync(`${path}.lock`, JSON.stringify({ pid: 2 ** 22 + 7, host: hostname(), token, since: '', ...record }));
      expect(await new FileLock(path, 60_000).tryAcquire()).toBe(false);
      utimesSync(`${path}.lock`, new Date(Date.now() - 120_000), new Date(Date.now() - 120_000));
      const d = new FileLock(path, 60_000);
      expect(await d.tryAcquire()).toBe(true);
      await d.release();
    }
  });

  test('a second sink on a locked file opens, refuses items with SinkBusyError, and takes over once it is free', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'sink-')), 'items.jsonl');
    const index = new MemoryIndex();
    const keyFields = { book: 'upc' };
    const first = await FileSink.open(path, jsonlFormat, keyFields, { index });
    const second = await FileSink.open(path, jsonlFormat, keyFields, { index, busyWaitMs: 1234 });
    await first.write([{ type: 'book', upc: 'a' }]);
    const refused = await second.write([{ type: 'book', upc: 'a' }]).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SinkBusyError);
    expect((refused as SinkBusyError).waitMs).toBe(1234);
    expect((refused as SinkBusyError).message).toContain(`pid ${process.pid}`);
    await first.close();
    await second.write([
      { type: 'book', upc: 'a' },
      { type: 'book', upc: 'b' },
    ]);
    await second.close();
    expect(readJsonlText(path)).toEqual(['a', 'b']);
  });
});

function readJsonlText(path: string): unknown[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { upc: unknown }).upc);
}

describe('item store decisions', () => {
  test('the content hash ignores crawlId, fetchedAt and spider, and key order', () => {
    const a = { type: 'book', upc: 'x', price: 1, crawlId: 'c1', fetchedAt: 't1', spider: 's' };
    const b = { price: 1, upc: 'x', type: 'book', crawlId: 'c2', fetchedAt: 't2', spider: 's' };
    expect(contentHash(a)).toBe(contentHash(b));
    expect(contentHash({ ...a, price: 2 })).not.toBe(contentHash(a));
  });
  test("only a document's own fault refuses it; a shutdown or failover error retries the whole batch", () => {
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
    {
      title: { css: 't' },
      price: { css: 'p', type: 'number' },
      pages: { css: 'n', type: 'integer' },
      inStock: { css: 's', type: 'boolean' },
      tags: { css: 'g', all: true },
      sizes: { css: 'z', all: true, type: 'integer' },
    },
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

  test("the fields of every item, as stored now (fetchedAt the fetcher's ISO string), and the store's bookkeeping", () => {
    expect(['type', 'url', 'spider', 'crawlId', 'fetchedAt'].map(instance)).toEqual(['String', 'String', 'String', 'String', 'String']);
    expect(['_id', 'firstSeenAt', 'lastSeenAt', 'changedAt', 'changes', 'contentHash'].map(instance)).toEqual(['Mixed', 'Date', 'Date', 'Date', 'Number', 'String']);
    expect(Object.keys(schema.paths).sort()).toEqual(
      ['_id', 'changedAt', 'changes', 'contentHash', 'crawlId', 'fetchedAt', 'firstSeenAt', 'inStock', 'lastSeenAt', 'pages', 'price', 'sizes', 'spider', 'tags', 'title', 'type', 'upc', 'url'].sort(),
    );
  });

  test("a unique index on the key field (url by default), built at open, not per write; strict; the type's collection", () => {
    expect(schema.indexes()).toEqual([[{ upc: 1 }, expect.objectContaining({ unique: true, name: 'upc_unique' })]]);
    expect(itemSchema(rule({})).indexes()).toEqual([[{ url: 1 }, expect.objectContaining({ unique: true, name: 'url_unique' })]]);
    expect([schema.get('strict'), schema.get('autoIndex'), schema.get('collection'), schema.get('versionKey')]).toEqual(['throw', false, 'book', false]);
  });

  test("a field named like the store's bookkeeping is a clear error, not a silent overwrite", () => {
    expect(() => itemSchema(rule({ changes: { css: 'c' } }))).toThrow(NonRetryableError);
    expect(() => itemSchema(rule({ changes: { css: 'c' } }))).toThrow(/field "changes" has a name the MongoDB store keeps for itself/);
  });

  test('one model per rule shape: the same fields and key share a name, other types of a field do not', () => {
    expect(itemModelName(rule({ price: { css: 'p', type: 'number' } }))).toBe(itemModelName(rule({ price: { css: 'other', type: 'number' } })));
    expect(itemModelName(rule({ price: { css: 'p', type: 'number' } }))).not.toBe(itemModelName(rule({ price: { css: 'p' } })));
    expect(itemModelName(rule({}, 'upc'))).not.toBe(itemModelName(rule({})));
  });

  test("castItem: mongoose casts each value to its field's type, keeps null, and refuses what does not fit, naming the field", () => {
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

describe("surtKey: pywb's lookup key (python surt's), from a fetched URL", () => {
  test('a directory loses its trailing slash, escapes of safe characters are undone, the query is sorted and lower-cased', () => {
    expect(surtKey('https://docs.python.org/3/library/')).toBe('org,python,docs)/3/library');
    expect(surtKey('http://www.Example.test/')).toBe('test,example)/');
    expect(surtKey('http://127.0.0.1:8080/catalogue/page-2.html')).toBe('1,0,0,127:8080)/catalogue/page-2.html');
    expect(surtKey('http://example.test/P%41th/?q=%7e&B=1')).toBe('test,example)/path?b=1&q=~');
    expect(surtKey('http://example.test/a%20b.html#top')).toBe('test,example)/a%20b.html');
    expect(surtKey('http://example.test/s?ie=utf-8%27&id=0%2C1')).toBe("test,example)/s?id=0,1&ie=utf-8'");
    expect(surtKey('http://example.test/x?jsessionid=0123456789abcdef0123456789abcdef&a=1')).toBe('test,example)/x?a=1');
  });
});
