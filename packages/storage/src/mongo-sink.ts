import { createHash } from 'node:crypto';
import mongoose, { type Connection, type Model } from 'mongoose';
import { calculateObjectSize } from 'bson';
import { redactUrl, retryDelay, type Item, type Logger, type Spider } from '@crawlfleet/core';
import { Batcher, type BatcherOptions, type FlushOutcome } from './batcher.js';
import type { ItemSink } from './sink.js';

/** MongoDB's document size limit; a larger item is refused here, as the server would refuse it. */
const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;
/** Fields that change on every crawl and do not make an item "changed". */
const VOLATILE = new Set(['crawlId', 'fetchedAt', 'spider']);

export interface MongoSinkOptions {
  batch?: BatcherOptions;
  log?: Logger;
  /** how long one reconnect wait may grow to while MongoDB is down */
  maxRetryDelayMs?: number;
  /** how long a flush holds its batch and retries before it fails its jobs */
  maxHoldMs?: number;
  /** a flush attempt that has not settled by then counts as failed and is retried (upserts are idempotent) */
  flushTimeoutMs?: number;
}

/** Rejects when `promise` has not settled within `ms`; the promise itself runs on. */
async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms)));
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The document id of an item: its key value. Upserts then find their document by `_id`, which every
 * MongoDB-compatible server looks up by primary key (FerretDB's SQLite handler pushes down only
 * `_id` filters; a filter on another field scans the collection, making a crawl quadratic).
 */
export function documentId(keyValue: unknown): string | number {
  return typeof keyValue === 'string' || typeof keyValue === 'number' ? keyValue : JSON.stringify(keyValue ?? null);
}

/** Pure: a stable hash of the item's content, so a changed item can be told from an unchanged one. */
export function contentHash(item: Item): string {
  const content = Object.keys(item)
    .filter((k) => !VOLATILE.has(k))
    .sort()
    .map((k) => [k, item[k]]);
  return createHash('sha1').update(JSON.stringify(content)).digest('hex');
}

/** Errors that mean "MongoDB is unreachable right now", as opposed to "this write is wrong". */
export function isTransientMongoError(err: unknown): boolean {
  const e = err as { name?: string; errorLabels?: string[]; code?: number; writeErrors?: unknown };
  if (e?.writeErrors) return false;
  if (e?.errorLabels?.includes('RetryableWriteError') || e?.errorLabels?.includes('TransientTransactionError')) return true;
  return /MongoNetwork|MongoServerSelection|MongoTopologyClosed|MongoNotConnected|PoolCleared|MongoWaitQueueTimeout/.test(e?.name ?? '') || e?.code === 91 || e?.code === 11600;
}

/**
 * Server error codes that mean "this document is wrong": the write would fail again, so the item is
 * refused and dead-lettered. Any other per-document error (a shutdown, a failover, an interrupted
 * operation) fails the whole flush, which is held and retried: upserts by key make that safe.
 */
const DOCUMENT_FAULT_CODES = new Set([
  2, // BadValue
  9, // FailedToParse
  14, // TypeMismatch
  52, // DollarPrefixedFieldName
  55, // InvalidDBRef
  56, // EmptyFieldName
  57, // DottedFieldName
  66, // ImmutableField
  121, // DocumentValidationFailure
  10334, // BSONObjectTooLarge
  17280, // KeyTooLong
  17419, // document too large
]);

/** Pure: is this per-document write error the document's own fault? */
export function isDocumentFault(code: number | undefined): boolean {
  return code !== undefined && DOCUMENT_FAULT_CODES.has(code);
}

const connections = new Map<string, Promise<Connection>>();

/** One pooled connection per URL, shared by every sink and the export in this process. */
export function mongoConnection(url: string): Promise<Connection> {
  let conn = connections.get(url);
  if (!conn) {
    // socketTimeoutMS: a connection the server stopped answering on fails instead of hanging a flush.
    conn = mongoose.createConnection(url, { serverSelectionTimeoutMS: 5000, connectTimeoutMS: 5000, socketTimeoutMS: 60_000, retryWrites: true }).asPromise();
    conn.catch(() => connections.delete(url));
    connections.set(url, conn);
  }
  return conn;
}

/**
 * The item store: one collection per item type, a unique index on its key field, batched unordered
 * upserts. Each item `$set`s its fields and `lastSeenAt`, `$setOnInsert`s `firstSeenAt`; an item whose
 * content hash differs from the stored one also gets `changedAt` and `changes + 1`. While MongoDB is
 * unreachable a flush waits and retries with backoff: nothing is dropped and nothing acknowledged.
 */
export class MongoSink implements ItemSink {
  private readonly batcher: Batcher<Item>;

  private constructor(
    private readonly models: Map<string, { model: Model<Record<string, unknown>>; key: string }>,
    private readonly url: string,
    private readonly options: MongoSinkOptions,
  ) {
    this.batcher = new Batcher((items) => this.flush(items), options.batch ?? { maxItems: 500, maxWaitMs: 100 });
  }

  static async open(url: string, spider: Spider, options: MongoSinkOptions = {}): Promise<MongoSink> {
    const conn = await mongoConnection(url);
    const models = new Map<string, { model: Model<Record<string, unknown>>; key: string }>();
    for (const rule of spider.items) {
      const key = rule.key ?? 'url';
      const schema = new mongoose.Schema({}, { strict: false, versionKey: false, autoIndex: false, collection: rule.type });
      schema.index({ [key]: 1 }, { unique: true, name: `${key}_unique` });
      const model = (conn.models[rule.type] as Model<Record<string, unknown>> | undefined) ?? conn.model<Record<string, unknown>>(rule.type, schema);
      await model.createIndexes();
      models.set(rule.type, { model, key });
    }
    return new MongoSink(models, url, options);
  }

  write(items: Item[]): Promise<void> {
    return this.batcher.add(items);
  }

  async close(): Promise<void> {
    await this.batcher.drain();
  }

  private async flush(items: Item[]): Promise<FlushOutcome> {
    const started = Date.now();
    for (let attempt = 1; ; attempt++) {
      try {
        return await withTimeout(this.flushOnce(items), this.options.flushTimeoutMs ?? 90_000, 'the MongoDB flush');
      } catch (err) {
        // Refusals of single documents come back in the outcome, not as errors: an error here means
        // the store could not take the batch at all (down, restarting, failing over, buffering). Hold
        // the batch and retry, acknowledging nothing; give up to the job's own retries only after
        // maxHoldMs, so a lasting fault still surfaces.
        if (Date.now() - started > (this.options.maxHoldMs ?? 10 * 60_000)) throw err;
        const wait = retryDelay(attempt, undefined, { baseMs: 250, maxMs: this.options.maxRetryDelayMs ?? 5_000 });
        this.options.log?.warn(
          { mongo: redactUrl(this.url), attempt, retryInMs: wait, transient: isTransientMongoError(err), err: { name: (err as Error).name, message: (err as Error).message } },
          'MongoDB unavailable: holding the batch and retrying',
        );
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  private async flushOnce(items: Item[]): Promise<FlushOutcome> {
    const outcome: (string | undefined)[] = items.map(() => undefined);
    const now = new Date();
    const byType = new Map<string, Map<string, number[]>>();
    items.forEach((item, i) => {
      const type = String(item.type);
      const target = this.models.get(type);
      if (!target) return void (outcome[i] = `no item rule for type ${JSON.stringify(type)}`);
      const size = calculateObjectSize(item);
      if (size > MAX_DOCUMENT_BYTES) return void (outcome[i] = `document too large for MongoDB: ${size} bytes > ${MAX_DOCUMENT_BYTES}`);
      const keyValue = JSON.stringify(item[target.key] ?? null);
      let group = byType.get(type);
      if (!group) byType.set(type, (group = new Map()));
      // Duplicates inside one batch collapse to one upsert; the last one wins.
      group.set(keyValue, [...(group.get(keyValue) ?? []), i]);
    });
    for (const [type, group] of byType) {
      const { model, key } = this.models.get(type)!;
      const latest = [...group.values()].map((indexes) => ({ indexes, item: items[indexes[indexes.length - 1]!]! }));
      const ids = latest.map((l) => documentId(l.item[key]));
      const stored = await model.collection.find({ _id: { $in: ids } } as never, { projection: { contentHash: 1 } }).toArray();
      const storedHash = new Map(stored.map((d) => [d._id as unknown as string | number, d.contentHash as string | undefined]));
      const refuse = (n: number, reason: string) => {
        for (const i of latest[n]!.indexes) outcome[i] = `MongoDB refused the document: ${reason}`;
      };
      // Three kinds of write, each as cheap as it can be: new items are inserted in bulk; unchanged
      // ones only move lastSeenAt (one updateMany per page, as they share crawlId and fetchedAt);
      // changed ones are updated one by one, with changedAt and changes + 1.
      const inserts: number[] = [];
      const unchanged = new Map<string, number[]>();
      const changed: number[] = [];
      const hashes = latest.map(({ item }) => contentHash(item));
      latest.forEach(({ item }, n) => {
        const previous = storedHash.get(ids[n]!);
        if (previous === undefined) inserts.push(n);
        else if (previous === hashes[n]) {
          const group = `${String(item.crawlId)}\u0001${String(item.fetchedAt)}`;
          unchanged.set(group, [...(unchanged.get(group) ?? []), n]);
        } else changed.push(n);
      });
      if (inserts.length > 0) {
        const docs = inserts.map((n) => ({ ...latest[n]!.item, _id: ids[n], firstSeenAt: now, lastSeenAt: now, contentHash: hashes[n], changes: 0 }));
        try {
          await model.collection.insertMany(docs as never[], { ordered: false });
        } catch (err) {
          const writeErrors = bulkWriteErrors(err);
          if (!writeErrors || writeErrors.some((we) => we.code !== 11000 && !isDocumentFault(we.code))) throw err;
          for (const we of writeErrors) {
            // Another writer inserted it a moment ago: update it instead.
            if (we.code === 11000) changed.push(inserts[we.index]!);
            else refuse(inserts[we.index]!, we.errmsg ?? `code ${we.code}`);
          }
        }
      }
      for (const group of unchanged.values()) {
        const { item } = latest[group[0]!]!;
        await model.collection.updateMany({ _id: { $in: group.map((n) => ids[n]) } } as never, { $set: { lastSeenAt: now, crawlId: item.crawlId, fetchedAt: item.fetchedAt, spider: item.spider } });
      }
      if (changed.length > 0) {
        const ops = changed.map((n) => ({
          updateOne: {
            filter: { _id: ids[n] } as never,
            update: { $set: { ...latest[n]!.item, lastSeenAt: now, changedAt: now, contentHash: hashes[n] }, $setOnInsert: { firstSeenAt: now }, $inc: { changes: 1 } },
            upsert: true,
          },
        }));
        try {
          await model.collection.bulkWrite(ops, { ordered: false });
        } catch (err) {
          const writeErrors = bulkWriteErrors(err);
          if (!writeErrors || writeErrors.some((we) => !isDocumentFault(we.code))) throw err;
          for (const we of writeErrors) refuse(changed[we.index]!, we.errmsg ?? `code ${we.code}`);
        }
      }
    }
    return outcome;
  }
}

function bulkWriteErrors(err: unknown): { index: number; code?: number; errmsg?: string }[] | undefined {
  const writeErrors = (err as { writeErrors?: unknown }).writeErrors;
  if (!writeErrors) return undefined;
  return (Array.isArray(writeErrors) ? writeErrors : [writeErrors]) as { index: number; code?: number; errmsg?: string }[];
}

export async function closeMongoConnections(): Promise<void> {
  const all = [...connections.values()];
  connections.clear();
  await Promise.all(all.map(async (c) => (await c.catch(() => undefined))?.close()));
}
