import { itemKeyFields, type Keys, type MongoSinkSpec, mongoUrlForSink, parseMongoCredentials, readListValue, type Logger, type SinkSpec, type Spider } from '@crawlfleet/core';
import { FileSink } from './file-sink.js';
import { RedisIdentityIndex, type IndexRedis } from './identity-index.js';
import { csvColumns, csvFormat, jsonlFormat } from './formats.js';
import { MongoSink } from './mongo-sink.js';
import type { BatcherOptions } from './batcher.js';
import type { ItemSink } from './sink.js';
import { openPageStore, pagesFilePath, type PageStore, type PagesLocation } from './pages.js';
import { RedisCaptureDigests } from './warc/digests.js';
import { WarcSink } from './warc/warc-sink.js';

export interface OpenSinkOptions {
  /** the writer's MONGO_URL, for crawls whose sink names no URL of its own */
  mongoUrl: string;
  /** the writer's MONGO_CREDENTIALS (default: read from the process environment) */
  mongoCredentials?: string[];
  log?: Logger;
  batch?: BatcherOptions;
  /** a file sink keeps the identities it wrote in the crawl's Redis (Keys.fileIndex) */
  redis?: IndexRedis;
  keys?: Keys;
  crawlId?: string;
  /** the warcinfo record's `software` (WARC output) */
  software?: string;
  /** this run of the crawl (its registration time): WARC output archives a URL once per run */
  run?: string;
}

/** A crawl's sinks: its items', its WARC output when it has one, its pages store when its spider recrawls. */
export interface CrawlSinks {
  items: ItemSink;
  archive?: WarcSink;
  pages?: PageStore;
  close(): Promise<void>;
}

/** Where a crawl's page records go: beside its item file, or in its MongoDB database. */
export function pagesLocation(spec: SinkSpec, options: Pick<OpenSinkOptions, 'mongoUrl' | 'mongoCredentials'>): PagesLocation {
  return spec.kind === 'mongo' ? { kind: 'mongo', url: mongoUrlOf(spec, options) } : { kind: 'file', path: pagesFilePath(spec.path) };
}

/** The URL this process opens for a MongoDB sink, with its own credentials for that server. */
function mongoUrlOf(spec: MongoSinkSpec, options: Pick<OpenSinkOptions, 'mongoUrl' | 'mongoCredentials'>): string {
  return mongoUrlForSink(spec, { mongoUrl: options.mongoUrl, mongoCredentials: options.mongoCredentials ?? envMongoCredentials() });
}

/** The index of a file sink: in the crawl's Redis slot. */
function fileIndex(options: OpenSinkOptions): RedisIdentityIndex {
  const { redis, keys, crawlId } = options;
  if (!redis || !keys || !crawlId) throw new Error("a file sink needs the writer's Redis, its keys and the crawl id (OpenSinkOptions redis, keys, crawlId)");
  return new RedisIdentityIndex(redis, keys.fileIndex(crawlId));
}

/** Opens the sink a crawl names. */
export async function openSink(spec: SinkSpec, spider: Spider, options: OpenSinkOptions): Promise<ItemSink> {
  const keyFields = itemKeyFields(spider);
  switch (spec.kind) {
    case 'jsonl':
      return FileSink.open(spec.path, jsonlFormat, keyFields, { index: fileIndex(options), batch: options.batch });
    case 'csv':
      return FileSink.open(spec.path, csvFormat(csvColumns(spider.items.flatMap((r) => Object.keys(r.fields)))), keyFields, { index: fileIndex(options), batch: options.batch });
    case 'mongo':
      return MongoSink.open(mongoUrlOf(spec, options), spider, {
        ...(options.log ? { log: options.log } : {}),
        ...(options.batch ? { batch: options.batch } : {}),
      });
  }
}

/** Opens the items' sink a crawl names, and its WARC output beside it. */
export async function openCrawlSinks(spec: SinkSpec, spider: Spider, options: OpenSinkOptions): Promise<CrawlSinks> {
  const items = await openSink(spec, spider, options);
  // The same batch sizes, but only item batches are reported (onFlush: the writer's batch metrics).
  const batch = options.batch ? { maxItems: options.batch.maxItems, maxWaitMs: options.batch.maxWaitMs } : undefined;
  const pages = spider.recrawl && options.crawlId ? openPageStore(pagesLocation(spec, options), options.crawlId, batch) : undefined;
  const withPages = (sinks: Omit<CrawlSinks, 'close'>): CrawlSinks => ({
    ...sinks,
    ...(pages ? { pages } : {}),
    close: async () => void (await Promise.all([sinks.items.close(), sinks.archive?.close(), pages?.close()])),
  });
  if (!spec.warc) return withPages({ items });
  try {
    const { redis, keys, crawlId } = options;
    if (!redis || !keys || !crawlId) throw new Error("WARC output needs the writer's Redis, its keys and the crawl id (OpenSinkOptions redis, keys, crawlId)");
    const index = keys.warcIndex(crawlId);
    const archive = await WarcSink.open(spec.warc, crawlId, {
      index: new RedisIdentityIndex(redis, index),
      digests: new RedisCaptureDigests(redis, index.digests),
      software: options.software ?? 'crawlfleet',
      ...(batch ? { batch } : {}),
      ...(options.log ? { log: options.log } : {}),
      ...(options.run ? { run: options.run } : {}),
    });
    return withPages({ items, archive });
  } catch (err) {
    await items.close().catch(() => undefined);
    throw err;
  }
}

function envMongoCredentials(): string[] {
  return parseMongoCredentials(readListValue(process.env.MONGO_CREDENTIALS ?? '', 'MONGO_CREDENTIALS', /\s+/));
}
