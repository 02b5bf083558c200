import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { ConfigError, errorMessage, type Logger, type SinkSpec, type Spider, type SpiderModuleRef } from '@crawlfleet/core';
import { admitAndEnqueue, crawlTake, newCrawlId, partKeysOfUrl, registerCrawl, whileInjecting, type CrawlLayout } from '@crawlfleet/crawl';
import { UserAgentRotation, makeLookup, newSitemapWalkStats, parseHostResolve, sitemapEntries, sitemapSkipped, type SitemapWalkStats } from '@crawlfleet/fetch';
import { allowedHosts, canonicalizeUrl, hostAllowed, type Candidate } from '@crawlfleet/frontier';
import type { FleetContext } from '@crawlfleet/runtime';

export interface SeedOptions {
  spider: Spider;
  /** a code spider's module, recorded so every worker loads the same code */
  module?: SpiderModuleRef;
  crawlId?: string;
  sink: (crawlId: string) => SinkSpec;
  /** URLs beyond the spider's start URLs */
  urls?: string[];
  /** a file of URLs, one per line; `#` starts a comment */
  urlsFile?: string;
  /** sitemaps (or robots.txt files listing them) to seed from, beyond the spider's sitemapUrls */
  sitemaps?: string[];
  /**
   * a recrawl: the known URLs, with what their last visit learnt, in place of the spider's start URLs
   * and sitemaps (which are among them)
   */
  known?: Candidate[];
  /** a test hook: runs once the crawl is registered, before its first URL is admitted */
  afterRegister?: () => Promise<void>;
}

export interface SeedResult {
  crawlId: string;
  /** false when the crawl id existed and was resumed */
  created: boolean;
  /** URLs newly admitted to the frontier */
  admitted: number;
}

function canonicalSeed(url: string, where: string): string {
  const canonical = canonicalizeUrl(url.trim());
  if (!canonical) throw new ConfigError(`${where}: ${JSON.stringify(url)} is not an http(s) URL`);
  return canonical;
}

/** The URLs of a URLs file, one per line (`#` starts a comment), canonical, read as a stream. */
async function* urlsOfFile(file: string): AsyncGenerator<string> {
  let lines: ReturnType<typeof createInterface>;
  try {
    const stream = createReadStream(file, { encoding: 'utf8' });
    await once(stream, 'open');
    lines = createInterface({ input: stream, crlfDelay: Infinity });
  } catch (err) {
    throw new ConfigError(`${file}: cannot read URLs file: ${(err as Error).message}`, { file, cause: err });
  }
  let n = 0;
  for await (const line of lines) {
    n++;
    const trimmed = line.trim();
    if (trimmed && !trimmed.startsWith('#')) yield canonicalSeed(trimmed, `${file}:${n}`);
  }
}

/** Reads a whole URLs file (small files; `seed` streams big ones). */
export async function readUrlsFile(file: string): Promise<string[]> {
  const urls: string[] = [];
  for await (const url of urlsOfFile(file)) urls.push(url);
  return urls;
}

/** Checks every line of a URLs file before anything is seeded; returns how many URLs it holds. */
async function checkUrlsFile(file: string): Promise<number> {
  let count = 0;
  for await (const _url of urlsOfFile(file)) count++;
  return count;
}

/** URLs admitted per step: a URLs file and sitemaps are streamed, never held whole in memory. */
const SEED_BATCH = 10_000;
/** How often a long seeding run logs its progress. */
const SEED_PROGRESS_EVERY = 100_000;

/** The items of a stream, `size` at a time, each made into what the caller needs. */
async function* batchesOf<T, U>(source: AsyncIterable<T> | Iterable<T>, size: number, map: (item: T) => U): AsyncGenerator<U[]> {
  let batch: U[] = [];
  for await (const item of source) {
    batch.push(map(item));
    if (batch.length >= size) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

/**
 * Registers a crawl (the spider and sink stored in Redis) and enqueues its start URLs and any others
 * given. Seeds are admitted whatever their host: naming a URL is asking for it. Seeding an existing
 * crawl again resumes it; URLs already fetched are not fetched again. A URLs file is checked whole
 * first (a bad line exits 2 before anything is seeded), then streamed in batches, with progress.
 * Sitemaps are streamed the same way, within the spider's sitemap bounds (what goes past one is
 * counted skipped); their first batch is read before the crawl is registered, so a sitemap source
 * that cannot be read fails the seed and leaves no crawl behind.
 */
export async function seedCrawl(ctx: FleetContext, options: SeedOptions): Promise<SeedResult> {
  const { spider } = options;
  const sources = await seedSources(options);
  const walk = newSitemapWalkStats();
  const fromSitemaps = batchesOf(sitemapCandidates(ctx, spider, sources.sitemaps, walk), SEED_BATCH, (c) => c);
  const first = await fromSitemaps.next();
  const crawlId = options.crawlId ?? newCrawlId(spider.name);
  const injection = `seed:${randomUUID()}`;
  let registered: Awaited<ReturnType<typeof registerCrawl>>;
  try {
    // The seeding run's injection opens with the registration: no done check can come in between.
    registered = await registerCrawl(ctx.redis, ctx.keys, crawlId, spider, options.sink(crawlId), options.module, ctx.env.frontierPartitions, injection);
  } catch (err) {
    await fromSitemaps.return(undefined);
    throw err;
  }
  const { created, layout } = registered;
  await options.afterRegister?.();
  const firstSitemapBatch = first.done ? [] : first.value;
  // Seeds are admitted a batch at a time, and fast workers may finish the first batch before the
  // next is admitted: as an injection, the seeding holds the crawl open until it ends (and a seeder
  // that dies lets go when its lease lapses); then the crawl is checked for completion.
  const admitted = await whileInjecting(
    ctx.redis,
    ctx.keys,
    layout,
    injection,
    () => admitSources(ctx, { crawlId, layout, spider, urlsFile: options.urlsFile }, sources, { firstSitemapBatch, fromSitemaps, walk }),
    false,
    true,
  );
  const { urls, inFile } = sources;
  ctx.log.info(
    { crawlId, created, admitted, seeds: urls.length + inFile, fromSitemaps: walk.urls, sitemapFiles: walk.files, partitions: layout.parts },
    created ? 'crawl registered' : 'crawl resumed',
  );
  return { crawlId, created, admitted };
}

/** What a seeding run admits: URLs (the start URLs unless a recrawl, and the arguments), a URLs file's count, sitemaps, known URLs. */
interface SeedSources {
  urls: string[];
  inFile: number;
  sitemaps: string[];
  known: Candidate[];
}

/** The seeding run's sources, each checked (a bad URL, a bad line of the URLs file: ConfigError, before anything is seeded). */
async function seedSources(options: SeedOptions): Promise<SeedSources> {
  const { spider } = options;
  const known = options.known ?? [];
  const recrawl = options.known !== undefined;
  const urls = [...(recrawl ? [] : spider.startUrls.map((u, i) => canonicalSeed(u, `startUrls[${i}]`))), ...(options.urls ?? []).map((u) => canonicalSeed(u, 'URL argument'))];
  const inFile = options.urlsFile ? await checkUrlsFile(options.urlsFile) : 0;
  const sitemaps = recrawl ? [] : [...(spider.sitemapUrls ?? []), ...(options.sitemaps ?? []).map((u) => canonicalSeed(u, '--sitemap'))];
  if (urls.length === 0 && inFile === 0 && sitemaps.length === 0 && known.length === 0) throw new ConfigError(`spider "${spider.name}" has no startUrls and no URLs were given`);
  return { urls, inFile, sitemaps, known };
}

/** Admits every source of a seeding run in turn, batch by batch; returns how many URLs were new. */
async function admitSources(
  ctx: FleetContext,
  target: { crawlId: string; layout: CrawlLayout; spider: Spider; urlsFile: string | undefined },
  sources: SeedSources,
  sitemapsRead: { firstSitemapBatch: Candidate[]; fromSitemaps: AsyncIterable<Candidate[]>; walk: SitemapWalkStats },
): Promise<number> {
  const { crawlId, layout, spider, urlsFile } = target;
  const { urls, inFile, sitemaps, known } = sources;
  const { firstSitemapBatch, fromSitemaps, walk } = sitemapsRead;
  const take = crawlTake(ctx.env.frontierWindow, layout, spider);
  const admit = (candidates: Candidate[]) => admitAndEnqueue(ctx.redis, ctx.keys, ctx.queues, { ...layout, spider }, candidates, { take });
  const admitStream = (batches: AsyncIterable<Candidate[]>, what: string, progress: () => Record<string, number>) => admitInBatches({ log: ctx.log, crawlId, admit }, batches, what, progress);
  try {
    let seen = (await admit([...urls.map(seedCandidate), ...firstSitemapBatch])).seen;
    if (known.length > 0)
      seen += await admitStream(
        batchesOf(known, SEED_BATCH, (c) => c),
        'the known URLs',
        () => ({ of: known.length }),
      );
    seen += await admitStream(fromSitemaps, 'sitemaps', () => ({ files: walk.files }));
    if (urlsFile) seen += await admitStream(batchesOf(urlsOfFile(urlsFile), SEED_BATCH, seedCandidate), 'the URLs file', () => ({ of: inFile }));
    return seen;
  } catch (err) {
    ctx.log.warn({ crawlId, err: errorMessage(err) }, `seeding stopped part way: crawl ${crawlId} keeps the URLs admitted so far; seed it again with --crawl-id ${crawlId} to go on`);
    throw err;
  } finally {
    // What the sitemap bounds left out counts as skipped, as the frontier counts what limits refuse.
    const skipped = sitemapSkipped(walk);
    if (skipped > 0) await ctx.redis.hincrby(partKeysOfUrl(ctx.keys, layout, sitemaps[0]!).counters, 'skipped', skipped);
  }
}

/** Admits a stream of batches, logging progress every SEED_PROGRESS_EVERY URLs; returns how many were new. */
async function admitInBatches(
  to: { log: Logger; crawlId: string; admit: (candidates: Candidate[]) => Promise<{ seen: number }> },
  batches: AsyncIterable<Candidate[]>,
  what: string,
  progress: () => Record<string, number>,
): Promise<number> {
  const started = Date.now();
  let done = 0;
  let seen = 0;
  for await (const batch of batches) {
    seen += (await to.admit(batch)).seen;
    const before = done;
    done += batch.length;
    if (Math.floor(done / SEED_PROGRESS_EVERY) > Math.floor(before / SEED_PROGRESS_EVERY)) {
      to.log.info({ crawlId: to.crawlId, done, ...progress(), urlsPerSecond: Math.round(done / Math.max(0.001, (Date.now() - started) / 1000)) }, `seeding from ${what}`);
    }
  }
  return seen;
}

function seedCandidate(url: string): Candidate {
  return { url, depth: 0, verdict: 'admit' };
}

/** Each page URL the sitemaps list with a `<lastmod>`, and that date (a recrawl's `--due` reads them). */
export async function sitemapLastmods(ctx: FleetContext, spider: Spider, sitemaps: string[]): Promise<Map<string, string>> {
  const lastmods = new Map<string, string>();
  for await (const c of sitemapCandidates(
    ctx,
    spider,
    sitemaps.map((u) => canonicalSeed(u, '--sitemap')),
    newSitemapWalkStats(),
  ))
    if (c.lastmod) lastmods.set(c.url, c.lastmod);
  return lastmods;
}

/**
 * The page URLs of the sitemaps, streamed as frontier candidates with their lastmod: a URL on a host
 * outside the crawl's scope is skipped by admission, one that is not an http(s) URL is passed over.
 */
async function* sitemapCandidates(ctx: FleetContext, spider: Spider, sitemaps: string[], stats: SitemapWalkStats): AsyncGenerator<Candidate> {
  if (sitemaps.length === 0) return;
  const lookup = makeLookup(parseHostResolve(ctx.env.hostResolve), spider.allowPrivateAddresses);
  const allowed = allowedHosts(spider);
  const entries = sitemapEntries(sitemaps, {
    spider,
    userAgent: new UserAgentRotation(ctx.env.userAgents).pick(spider.userAgents),
    log: ctx.log,
    stats,
    ...(lookup ? { lookup } : {}),
  });
  for await (const entry of entries) {
    const url = canonicalizeUrl(entry.url);
    if (url) yield { url, depth: 0, verdict: hostAllowed(url, allowed) ? 'admit' : 'out-of-scope', ...(entry.lastmod ? { lastmod: entry.lastmod } : {}) };
  }
}
