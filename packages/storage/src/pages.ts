import { createReadStream, existsSync } from 'node:fs';
import { appendFile, mkdir } from 'node:fs/promises';
import { basename, dirname, extname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { pageRecordSchema, type PageRecord } from '@crawlfleet/core';
import { Batcher, type BatcherOptions } from './batcher.js';
import { mongoConnection } from './mongo-sink.js';

/**
 * A crawl's pages store (a spider with `recrawl`): each fetched URL's record after its last visit,
 * outside Redis, beside the items, so that a recrawl months later still knows what to ask for.
 * A record replaces the URL's last one; writing one twice (a write job that ran again) is harmless.
 */
export interface PageStore {
  write(records: PageRecord[]): Promise<void>;
  close(): Promise<void>;
}

/** `books.jsonl` -> `books.pages.jsonl`, beside it. */
export function pagesFilePath(itemsPath: string): string {
  const name = basename(itemsPath, extname(itemsPath));
  return join(dirname(itemsPath), `${name}.pages.jsonl`);
}

/**
 * A store whose records go in batches (one write per batch), each caller's promise settling with
 * the batch that holds its records.
 */
function batchedStore(flush: (records: PageRecord[]) => Promise<void>, batch: BatcherOptions): PageStore {
  const batcher = new Batcher<PageRecord>(flush, batch);
  return { write: (records) => batcher.add(records), close: () => batcher.drain() };
}

/**
 * A file sink's pages: JSON lines appended, one write per batch (the newest line of a URL wins when
 * read). Appends need no lock: each batch is one `write` of a file opened O_APPEND, and a line torn by
 * a crash does not parse and is skipped.
 */
function filePageStore(path: string, batch: BatcherOptions): PageStore {
  return batchedStore(async (records) => {
    await mkdir(dirname(path), { recursive: true });
    await appendFile(path, records.map((r) => `${JSON.stringify(r)}\n`).join(''), { flag: 'a' });
  }, batch);
}

/** The `pages` collection of the sink's database: `_id` is the crawl id and the URL. */
const PAGES_COLLECTION = 'pages';
const pageId = (crawlId: string, url: string) => `${crawlId} ${url}`;

function mongoPageStore(url: string, crawlId: string, batch: BatcherOptions): PageStore {
  return batchedStore(async (records) => {
    const pages = (await mongoConnection(url)).db!.collection(PAGES_COLLECTION);
    await pages.bulkWrite(
      records.map((r) => ({ replaceOne: { filter: { _id: pageId(crawlId, r.url) as never }, replacement: { ...r, crawlId }, upsert: true } })),
      { ordered: false },
    );
  }, batch);
}

/** Where a crawl's pages are kept: beside its item file, or in its MongoDB database. */
export type PagesLocation = { kind: 'file'; path: string } | { kind: 'mongo'; url: string };

export function openPageStore(location: PagesLocation, crawlId: string, batch: BatcherOptions = { maxItems: 500, maxWaitMs: 50 }): PageStore {
  return location.kind === 'file' ? filePageStore(location.path, batch) : mongoPageStore(location.url, crawlId, batch);
}

function parseRecord(value: unknown): PageRecord | undefined {
  const checked = pageRecordSchema.safeParse(value);
  return checked.success ? checked.data : undefined;
}

/** Every URL's latest record, for `recrawl`. */
export async function readPageRecords(location: PagesLocation, crawlId: string): Promise<PageRecord[]> {
  if (location.kind === 'mongo') {
    const pages = (await mongoConnection(location.url)).db!.collection(PAGES_COLLECTION);
    const out: PageRecord[] = [];
    for await (const doc of pages.find({ crawlId }, { projection: { _id: 0, crawlId: 0 } })) {
      const record = parseRecord(doc);
      if (record) out.push(record);
    }
    return out;
  }
  if (!existsSync(location.path)) return [];
  const latest = new Map<string, PageRecord>();
  for await (const line of createInterface({ input: createReadStream(location.path, 'utf8'), crlfDelay: Infinity })) {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      continue;
    }
    const record = parseRecord(value);
    if (record) latest.set(record.url, record);
  }
  return [...latest.values()];
}
