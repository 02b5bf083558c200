import { createHash } from 'node:crypto';
import mongoose, { type AnyBulkWriteOperation, type Connection, type Model, type Schema } from 'mongoose';
import { calculateObjectSize } from 'bson';
import { redactUrl, retryDelay, type Item, type ItemRule, type Logger, type Spider } from '@crawlfleet/core';
import { Batcher, type BatcherOptions, type FlushOutcome } from './batcher.js';
import { castItem, itemModelName, itemSchema } from './item-schema.js';
import type { ItemSink } from './sink.js';
import { classifySinkError, isDocumentFault, shortAcknowledgement } from './sink-errors.js';

/** MongoDB's document size limit; a larger item is refused here, as the server would refuse it. */
const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;
/**
 * Changed items are upserted in bulk writes of at most this many operations. FerretDB 1.24.2's SQLite
 * backend holds one of its 100 pooled connections per update statement until the whole command ends,
 * so one bulk write of 100 updates or more never finishes, and the database stays stuck after it
 * (docs/ferretdb.md). On MongoDB the extra round trips cost little: changed items are the rare ones.
 */
export const MAX_UPDATES_PER_BULK_WRITE = 50;
/** Fields that change on every crawl and do not make an item "changed". */
const VOLATILE = new Set(['crawlId', 'fetchedAt', 'spider']);

export interface MongoSinkOptions {
  batch?: BatcherOptions;
  log?: Logger;
  /** how long one reconnect wait may grow to while MongoDB is down */
  maxRetryDelayMs?: number;
  /**
   * how long a flush holds its batch and retries while MongoDB is unavailable before it fails its
   * jobs (the writer then parks them, without spending attempts, until MongoDB answers: there is no
   * limit on the outage); a flush while MongoDB is known to be down tries once and does not hold
   */
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

const connections = new Map<string, Promise<Connection>>();

/**
 * A sink that has found MongoDB unavailable for this long replaces its client with a new one, and
 * again after as long while the outage lasts. The driver's server monitor can wedge for good (seen
 * with mongodb 6.20 and in 7.9.1's code): when a server closes its connections (a restart), a
 * heartbeat written to a socket that closed an instant earlier, before the driver saw the close,
 * waits for a 'drain' that never comes. With no heartbeat the server stays unknown to that client,
 * however long it has been back; a new client has a new monitor.
 */
export const RENEW_CLIENT_AFTER_MS = 15_000;

/** The store's bookkeeping on a stored item, beside the item's own fields (see `itemSchema`). */
interface StoredItem {
  _id: string | number;
  firstSeenAt: Date;
  lastSeenAt: Date;
  changedAt?: Date;
  changes: number;
  contentHash: string;
}

/** The model of one item type, and its key field. */
interface ItemModel {
  model: Model<StoredItem>;
  key: string;
}

/**
 * When a flush last reached the server on each URL, in this process (`performance.now()`, which no
 * clock step moves): proof the store answers (`mongoAnsweredAt`). One entry per URL, as `connections`.
 */
const answeredAt = new Map<string, number>();

/** The `performance.now()` at which a flush last reached the server on `url` in this process, if one did. */
export function mongoAnsweredAt(url: string): number | undefined {
  return answeredAt.get(url);
}

/** One pooled connection per URL, shared by every sink and the export in this process. */
export function mongoConnection(url: string): Promise<Connection> {
  let conn = connections.get(url);
  if (!conn) {
    // socketTimeoutMS: a connection the server stopped answering on fails instead of hanging a flush.
    const connection = mongoose.createConnection(url, { serverSelectionTimeoutMS: 5000, connectTimeoutMS: 5000, socketTimeoutMS: 60_000, retryWrites: true });
    conn = connection.asPromise();
    conn.catch(() => {
      connections.delete(url);
      // mongoose keeps every connection it made in its list; a writer that retries its open through
      // a long outage would grow that list by one failed connection every few seconds.
      void connection.destroy(true).catch(() => undefined);
    });
    connections.set(url, conn);
  }
  return conn;
}

/**
 * Drops `url`'s pooled connection if it is still `stale` (another sink may have replaced it
 * already), so the next `mongoConnection(url)` opens a new client. Operations still running on the
 * old one fail as unavailable and are retried.
 */
async function renewMongoConnection(url: string, stale: Connection): Promise<void> {
  const cached = connections.get(url);
  if (!cached || (await cached.catch(() => undefined)) !== stale || connections.get(url) !== cached) return;
  connections.delete(url);
  await stale.destroy(true).catch(() => undefined);
}

/**
 * The item store: one collection per item type, written through a mongoose model built from the
 * spider's item rule (`itemSchema`: the fields typed by their rules, a unique index on the key field),
 * batched unordered upserts. Each item is cast by mongoose first; one that does not fit is refused
 * alone, with its reason. Each item `$set`s its fields and `lastSeenAt`, `$setOnInsert`s
 * `firstSeenAt`; an item whose content hash differs from the stored one also gets `changedAt` and
 * `changes + 1`. While MongoDB is unreachable a flush waits and retries with backoff for up to
 * `maxHoldMs`, then fails its callers with the driver's error (which `classifySinkError` calls
 * `unavailable`): nothing is dropped and nothing acknowledged.
 */
export class MongoSink implements ItemSink {
  private readonly batcher: Batcher<Item>;
  /** when this sink's flushes began to find MongoDB unavailable; undefined while it answers */
  private unavailableSince: number | undefined;
  /** when this sink last replaced its client (see RENEW_CLIENT_AFTER_MS) */
  private renewedAt = 0;
  /** the connection the models are bound to, and the models, one per item type */
  private bound: Connection | undefined;
  /** false for a client whose write concern is w: 0 (its writes report no counts) */
  private acknowledged = true;
  private models = new Map<string, ItemModel>();

  private constructor(
    private readonly schemas: { rule: ItemRule; schema: Schema }[],
    private readonly url: string,
    private readonly options: MongoSinkOptions,
  ) {
    this.batcher = new Batcher((items) => this.flush(items), options.batch ?? { maxItems: 500, maxWaitMs: 100 });
  }

  static async open(url: string, spider: Spider, options: MongoSinkOptions = {}): Promise<MongoSink> {
    const sink = new MongoSink(
      spider.items.map((rule) => ({ rule, schema: itemSchema(rule) })),
      url,
      options,
    );
    await sink.bind();
    return sink;
  }

  write(items: Item[]): Promise<void> {
    return this.batcher.add(items);
  }

  async close(): Promise<void> {
    await this.batcher.drain();
  }

  /** Binds the models to the pooled connection, again whenever that connection was replaced. */
  private async bind(): Promise<void> {
    const conn = await mongoConnection(this.url);
    if (conn === this.bound) return;
    const models = new Map<string, ItemModel>();
    for (const { rule, schema } of this.schemas) {
      // One model per item rule, named by its fields and key: crawls of other spiders in this process
      // may have an item type of the same name with other fields, each with its own schema.
      const name = itemModelName(rule);
      const model = (conn.models[name] as Model<StoredItem> | undefined) ?? conn.model<StoredItem>(name, schema, rule.type);
      await model.createIndexes();
      models.set(rule.type, { model, key: rule.key ?? 'url' });
    }
    this.models = models;
    // A MONGO_URL with w=0 asks for writes nobody acknowledges: they report no counts to check.
    this.acknowledged = conn.getClient().writeConcern?.w !== 0;
    this.bound = conn;
  }

  private async flush(items: Item[]): Promise<FlushOutcome> {
    const started = Date.now();
    // A short outage (a restart, a failover) passes within the hold, without moving any job. A store
    // already known to be down gets one try: its jobs are better parked by the writer (BullMQ's
    // delayed set, no worker slot, no attempt spent) than held here one batch after another.
    const holdMs = this.unavailableSince === undefined ? (this.options.maxHoldMs ?? 30_000) : 0;
    for (let attempt = 1; ; attempt++) {
      try {
        const outcome = await withTimeout(
          this.bind().then(() => this.flushOnce(items)),
          this.options.flushTimeoutMs ?? 90_000,
          'the MongoDB flush',
        );
        if (this.unavailableSince !== undefined) {
          this.options.log?.info({ mongo: redactUrl(this.url), unavailableForMs: Date.now() - this.unavailableSince }, 'MongoDB available again: batches are stored');
          this.unavailableSince = undefined;
        }
        return outcome;
      } catch (err) {
        // Refusals of single documents come back in the outcome, not as errors: an error here means
        // the store could not take the batch at all (down, restarting, failing over). Hold the batch
        // and retry, acknowledging nothing; after maxHoldMs the jobs fail, and the writer tells by the
        // error whether to park them (MongoDB unavailable) or spend one of their attempts.
        const kind = classifySinkError(err);
        const errInfo = { name: (err as Error).name, message: (err as Error).message };
        if (kind === 'unavailable' && this.unavailableSince === undefined) {
          this.unavailableSince = Date.now();
          this.options.log?.warn({ mongo: redactUrl(this.url), err: errInfo }, 'MongoDB unavailable: holding the batch and retrying');
        }
        if (kind === 'unavailable' && this.bound && Date.now() - this.unavailableSince! >= RENEW_CLIENT_AFTER_MS && Date.now() - this.renewedAt >= RENEW_CLIENT_AFTER_MS) {
          this.renewedAt = Date.now();
          this.options.log?.info({ mongo: redactUrl(this.url), unavailableForMs: Date.now() - this.unavailableSince! }, 'MongoDB unavailable for a while: replacing the client');
          await renewMongoConnection(this.url, this.bound);
        }
        if (Date.now() - started >= holdMs) throw err;
        const wait = retryDelay(attempt, undefined, { baseMs: 250, maxMs: this.options.maxRetryDelayMs ?? 5_000 });
        this.options.log?.debug({ mongo: redactUrl(this.url), attempt, retryInMs: wait, kind, err: errInfo }, 'MongoDB flush failed: retrying');
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  /**
   * One try at storing a batch: each item cast and checked alone, then per item type the stored hashes
   * read, and three kinds of write (see `planWrites`). The outcome holds each item's refusal, if any.
   */
  private async flushOnce(items: Item[]): Promise<FlushOutcome> {
    const outcome: (string | undefined)[] = items.map(() => undefined);
    const now = new Date();
    const { docs, byType } = this.castBatch(items, outcome);
    for (const [type, group] of byType) {
      const batch = await this.readStored(type, group, docs, outcome, now);
      const plan = planWrites(batch.latest, batch.ids, batch.hashes, batch.storedHash);
      await this.insertNew(batch, plan);
      await this.touchUnchanged(batch, plan.unchanged);
      await this.updateChanged(batch, plan.changed);
    }
    // Only a batch that reached the server (each type's stored hashes were read back) proves it
    // answers: one whose items were all refused by the cast never asked it anything.
    if (byType.size > 0) answeredAt.set(this.url, performance.now());
    return outcome;
  }

  /**
   * Each item cast by mongoose against its type's schema; an item that does not fit is refused
   * alone, with the field and the reason, before anything is written. The others are grouped by type
   * and key value.
   */
  private castBatch(items: Item[], outcome: (string | undefined)[]): { docs: (Item | undefined)[]; byType: Map<string, Map<string, number[]>> } {
    const docs: (Item | undefined)[] = items.map(() => undefined);
    const byType = new Map<string, Map<string, number[]>>();
    items.forEach((item, i) => {
      const type = String(item.type);
      const cast = this.castOne(type, item);
      if ('reason' in cast) {
        outcome[i] = cast.reason;
        return;
      }
      docs[i] = cast.doc;
      let group = byType.get(type);
      if (!group) {
        group = new Map();
        byType.set(type, group);
      }
      // Duplicates inside one batch collapse to one upsert; the last one wins.
      group.set(cast.keyValue, [...(group.get(cast.keyValue) ?? []), i]);
    });
    return { docs, byType };
  }

  /** The document of one item and its key value (as JSON), or why it is refused. */
  private castOne(type: string, item: Item): { doc: Item; keyValue: string } | { reason: string } {
    const target = this.models.get(type);
    if (!target) return { reason: `no item rule for type ${JSON.stringify(type)}` };
    const cast = castItem(target.model.schema, item);
    if (cast.reason !== undefined) return { reason: `MongoDB refused the document: ${cast.reason}` };
    const size = calculateObjectSize(cast.doc);
    if (size > MAX_DOCUMENT_BYTES) return { reason: `document too large for MongoDB: ${size} bytes > ${MAX_DOCUMENT_BYTES}` };
    return { doc: cast.doc, keyValue: JSON.stringify(cast.doc[target.key] ?? null) };
  }

  /** One type's share of the batch: the latest item of each key, their ids and hashes, and the hashes stored. */
  private async readStored(type: string, group: Map<string, number[]>, docs: (Item | undefined)[], outcome: (string | undefined)[], now: Date): Promise<TypeBatch> {
    const { model, key } = this.models.get(type)!;
    const latest = [...group.values()].map((indexes) => ({ indexes, item: docs[indexes[indexes.length - 1]!]! }));
    const ids = latest.map((l) => documentId(l.item[key]));
    const stored = await model
      .find({ _id: { $in: ids } }, { contentHash: 1 })
      .lean<{ _id: string | number; contentHash?: string }[]>()
      .exec();
    const storedHash = new Map(stored.map((d) => [d._id, d.contentHash]));
    const hashes = latest.map(({ item }) => contentHash(item));
    return { model, latest, ids, hashes, storedHash, now, outcome };
  }

  /**
   * New items, inserted in bulk. One that another writer inserted a moment ago joins `plan.changed`
   * (it is updated instead); one refused for its document is refused alone; anything else fails the flush.
   */
  private async insertNew(batch: TypeBatch, plan: WritePlan): Promise<void> {
    const { inserts, changed } = plan;
    if (inserts.length === 0) return;
    const { model, latest, ids, hashes, now } = batch;
    // Already cast, path by path: `lean` spares a second cast through a hydrated Document each.
    const newDocs = inserts.map((n) => ({ ...latest[n]!.item, _id: ids[n], firstSeenAt: now, lastSeenAt: now, contentHash: hashes[n], changes: 0 }));
    try {
      const result = await model.insertMany(newDocs, { ordered: false, lean: true, rawResult: true });
      throwIfShort('insert', newDocs.length, this.acknowledged && result.acknowledged, result.insertedCount);
    } catch (err) {
      const writeErrors = bulkWriteErrors(err);
      // A write-concern error comes with no per-document error: nothing of the batch is known stored.
      if (!writeErrors?.length || hasWriteConcernError(err) || writeErrors.some((we) => we.code !== 11000 && !isDocumentFault(we.code))) throw err;
      for (const we of writeErrors) {
        // Another writer inserted it a moment ago: update it instead.
        if (we.code === 11000) changed.push(inserts[we.index]!);
        else refuse(batch, inserts[we.index]!, we.errmsg ?? `code ${we.code}`);
      }
    }
  }

  /** Unchanged items only move lastSeenAt: one updateMany per page, as they share crawlId and fetchedAt. */
  private async touchUnchanged(batch: TypeBatch, unchanged: Map<string, number[]>): Promise<void> {
    const { model, latest, ids, now } = batch;
    for (const group of unchanged.values()) {
      const { item } = latest[group[0]!]!;
      const result = await model.updateMany({ _id: { $in: group.map((n) => ids[n]) } }, { $set: { lastSeenAt: now, crawlId: item.crawlId, fetchedAt: item.fetchedAt, spider: item.spider } }).exec();
      // Fewer matched than were read a moment ago: some were removed since, and are inserted on the retry.
      throwIfShort('lastSeenAt update', group.length, this.acknowledged && result.acknowledged, result.matchedCount);
    }
  }

  /** Changed items, updated one by one (in bulk writes) with changedAt and changes + 1. */
  private async updateChanged(batch: TypeBatch, changed: number[]): Promise<void> {
    if (changed.length === 0) return;
    const { model, latest, ids, hashes, now } = batch;
    // mongoose casts each operation against the schema (a cast or strict-mode failure skips that
    // operation and is reported in `mongoose.results`; the others are written).
    const ops = changed.map((n) => ({
      updateOne: {
        filter: { _id: ids[n] },
        update: { $set: { ...latest[n]!.item, lastSeenAt: now, changedAt: now, contentHash: hashes[n] }, $setOnInsert: { firstSeenAt: now }, $inc: { changes: 1 } },
        upsert: true,
      },
    }));
    const failures = await this.bulkUpdate(model, ops);
    for (const f of failures) refuse(batch, changed[f.index]!, f.message);
  }

  /**
   * Runs the updates in bulk writes of MAX_UPDATES_PER_BULK_WRITE, and returns the operations refused
   * for their document (index into `ops`); anything else fails the flush, a short answer included.
   */
  private async bulkUpdate(model: Model<StoredItem>, ops: AnyBulkWriteOperation[]): Promise<OpFailure[]> {
    const refused: OpFailure[] = [];
    for (let from = 0; from < ops.length; from += MAX_UPDATES_PER_BULK_WRITE) {
      let failures: OpFailure[];
      try {
        const slice = ops.slice(from, from + MAX_UPDATES_PER_BULK_WRITE);
        const result = await model.bulkWrite(slice, { ordered: false });
        failures = opFailures(result) ?? [];
        throwIfShort('update', slice.length - failures.length, this.acknowledged, result.matchedCount + result.upsertedCount);
      } catch (err) {
        const found = opFailures(err);
        if (!found?.length || hasWriteConcernError(err) || found.some((f) => !f.cast && !isDocumentFault(f.code))) throw err;
        failures = found;
      }
      for (const f of failures) refused.push({ ...f, index: from + f.index });
    }
    return refused;
  }
}

/** One item type's share of a flush: the latest item of each key, and what the steps share about them. */
interface TypeBatch {
  model: Model<StoredItem>;
  /** per key: the indexes in the batch of its items, and the latest of them (the one written) */
  latest: { indexes: number[]; item: Item }[];
  ids: (string | number)[];
  hashes: string[];
  storedHash: Map<string | number, string | undefined>;
  now: Date;
  /** the flush's outcome, one entry per item of the batch */
  outcome: (string | undefined)[];
}

/** How each latest item of a type is written, by its index in `latest`. */
export interface WritePlan {
  /** not stored yet */
  inserts: number[];
  /** stored with the same content hash, grouped by crawl and fetch time (one updateMany each) */
  unchanged: Map<string, number[]>;
  /** stored with another content hash */
  changed: number[];
}

/**
 * Pure: three kinds of write, each as cheap as it can be: new items are inserted in bulk; unchanged
 * ones only move lastSeenAt (one updateMany per page, as they share crawlId and fetchedAt); changed
 * ones are updated one by one, with changedAt and changes + 1.
 */
export function planWrites(latest: { item: Item }[], ids: (string | number)[], hashes: string[], storedHash: Map<string | number, string | undefined>): WritePlan {
  const plan: WritePlan = { inserts: [], unchanged: new Map(), changed: [] };
  latest.forEach(({ item }, n) => {
    const previous = storedHash.get(ids[n]!);
    if (previous === undefined) plan.inserts.push(n);
    else if (previous === hashes[n]) {
      const group = `${String(item.crawlId)}\u0001${String(item.fetchedAt)}`;
      plan.unchanged.set(group, [...(plan.unchanged.get(group) ?? []), n]);
    } else plan.changed.push(n);
  });
  return plan;
}

/** Refuses every item of the batch that the `n`th latest item stands for. */
function refuse(batch: TypeBatch, n: number, reason: string): void {
  for (const i of batch.latest[n]!.indexes) batch.outcome[i] = `MongoDB refused the document: ${reason}`;
}

/**
 * Throws ShortAcknowledgementError when the server acknowledged fewer documents than `expected`
 * (inserted; matched; or matched and upserted). An unacknowledged write (w: 0) reports no counts.
 */
function throwIfShort(operation: string, expected: number, acknowledged: boolean, count: number): void {
  if (!acknowledged) return;
  const short = shortAcknowledgement(operation, expected, count);
  if (short) throw short;
}

/** A bulk write error that also carries a write-concern error (the driver's BulkWriteResult.getWriteConcernError). */
const hasWriteConcernError = (err: unknown) => {
  const e = err as { writeConcernError?: unknown; result?: { getWriteConcernError?: () => unknown } } | null;
  return Boolean(e?.writeConcernError) || (typeof e?.result?.getWriteConcernError === 'function' && Boolean(e.result.getWriteConcernError()));
};

interface OpFailure {
  index: number;
  /** a mongoose cast or strict-mode refusal of the operation, before it reached the server */
  cast: boolean;
  code?: number;
  message: string;
}

/**
 * The failed operations of an unordered `Model.bulkWrite`, from its result or its error, by their
 * index in the operations given. With cast refusals among them mongoose sends only the others, so
 * the server's indexes are of that shorter list; its `mongoose.results` maps them back, one entry per
 * operation (null when written). Undefined when there is no failure list (a result with none, or an
 * error that is no bulk write's).
 */
function opFailures(resultOrError: unknown): OpFailure[] | undefined {
  const results = (resultOrError as { mongoose?: { results?: unknown[] } } | null)?.mongoose?.results;
  if (Array.isArray(results)) {
    return results.flatMap((r, index): OpFailure[] => {
      if (r === null || r === undefined) return [];
      if (r instanceof mongoose.Error) return [{ index, cast: true, message: r.message }];
      const we = writeError(r);
      return [{ index, cast: false, ...(we.code !== undefined ? { code: we.code } : {}), message: we.errmsg ?? `code ${we.code}` }];
    });
  }
  return bulkWriteErrors(resultOrError)?.map((we) => ({ index: we.index, cast: false, ...(we.code !== undefined ? { code: we.code } : {}), message: we.errmsg ?? `code ${we.code}` }));
}

type RawWriteError = { index?: number; code?: number; errmsg?: string; err?: { index?: number; code?: number; errmsg?: string } };

/** The driver's WriteError keeps its fields in `err` behind getters; mongoose passes on copies that keep only `err`. */
function writeError(we: unknown): { index: number; code?: number; errmsg?: string } {
  const w = we as RawWriteError;
  const code = w.code ?? w.err?.code;
  const errmsg = w.errmsg ?? w.err?.errmsg;
  return { index: (w.index ?? w.err?.index)!, ...(code !== undefined ? { code } : {}), ...(errmsg !== undefined ? { errmsg } : {}) };
}

function bulkWriteErrors(err: unknown): { index: number; code?: number; errmsg?: string }[] | undefined {
  const writeErrors = (err as { writeErrors?: unknown } | null)?.writeErrors;
  if (!writeErrors) return undefined;
  return (Array.isArray(writeErrors) ? writeErrors : [writeErrors]).map(writeError);
}

export async function closeMongoConnections(): Promise<void> {
  const all = [...connections.values()];
  connections.clear();
  answeredAt.clear();
  await Promise.all(all.map(async (c) => (await c.catch(() => undefined))?.close()));
}
