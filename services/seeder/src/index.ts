import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { ConfigError, type SinkSpec, type Spider, type SpiderModuleRef } from '@crawlfleet/core';
import { admitAndEnqueue, crawlTake, newCrawlId, registerCrawl, whileInjecting } from '@crawlfleet/crawl';
import { UserAgentRotation, collectSitemapUrls, makeLookup, parseHostResolve } from '@crawlfleet/fetch';
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

/** URLs of a URLs file admitted per step: the file is streamed, never held whole in memory. */
const SEED_BATCH = 10_000;
/** How often a long seeding run logs its progress. */
const SEED_PROGRESS_EVERY = 100_000;

/**
 * Registers a crawl (the spider and sink stored in Redis) and enqueues its start URLs and any others
 * given. Seeds are admitted whatever their host: naming a URL is asking for it. Seeding an existing
 * crawl again resumes it; URLs already fetched are not fetched again. A URLs file is checked whole
 * first (a bad line exits 2 before anything is seeded), then streamed in batches, with progress.
 */
export async function seedCrawl(ctx: FleetContext, options: SeedOptions): Promise<SeedResult> {
  const { spider } = options;
  const urls = [...spider.startUrls.map((u, i) => canonicalSeed(u, `startUrls[${i}]`)), ...(options.urls ?? []).map((u) => canonicalSeed(u, 'URL argument'))];
  const inFile = options.urlsFile ? await checkUrlsFile(options.urlsFile) : 0;
  const sitemaps = [...(spider.sitemapUrls ?? []), ...(options.sitemaps ?? []).map((u) => canonicalSeed(u, '--sitemap'))];
  if (urls.length === 0 && inFile === 0 && sitemaps.length === 0) throw new ConfigError(`spider "${spider.name}" has no startUrls and no URLs were given`);
  // Read the sitemaps before registering: one that cannot be read fails the seed, leaving no crawl behind.
  const fromSitemaps = sitemaps.length > 0 ? await sitemapCandidates(ctx, spider, sitemaps) : [];
  const crawlId = options.crawlId ?? newCrawlId(spider.name);
  const { created, layout } = await registerCrawl(ctx.redis, ctx.keys, crawlId, spider, options.sink(crawlId), options.module, ctx.env.frontierPartitions);
  const crawl = { ...layout, spider };
  const take = crawlTake(ctx.env.frontierWindow, layout, spider);
  const admit = (candidates: Candidate[]) => admitAndEnqueue(ctx.redis, ctx.keys, ctx.queues, crawl, candidates, { take });
  const seeds = (list: string[]): Candidate[] => list.map((url) => ({ url, depth: 0, verdict: 'admit' as const }));
  // Seeds are admitted a batch at a time, and fast workers may finish the first batch before the
  // next is admitted: as an injection, the seeding holds the crawl open until it ends (and a seeder
  // that dies lets go when its lease lapses); then the crawl is checked for completion.
  const admitted = await whileInjecting(ctx.redis, ctx.keys, layout, `seed:${randomUUID()}`, async () => {
    let seen = (await admit([...seeds(urls), ...fromSitemaps])).seen;
    if (options.urlsFile) {
      const started = Date.now();
      let batch: string[] = [];
      let done = 0;
      const flush = async () => {
        seen += (await admit(seeds(batch))).seen;
        done += batch.length;
        batch = [];
        if (done % SEED_PROGRESS_EVERY < SEED_BATCH && inFile > SEED_PROGRESS_EVERY) {
          ctx.log.info({ crawlId, done, of: inFile, urlsPerSecond: Math.round(done / Math.max(0.001, (Date.now() - started) / 1000)) }, 'seeding from the URLs file');
        }
      };
      for await (const url of urlsOfFile(options.urlsFile)) {
        batch.push(url);
        if (batch.length >= SEED_BATCH) await flush();
      }
      if (batch.length > 0) await flush();
    }
    return seen;
  });
  ctx.log.info({ crawlId, created, admitted, seeds: urls.length + inFile, fromSitemaps: fromSitemaps.length, partitions: layout.parts }, created ? 'crawl registered' : 'crawl resumed');
  return { crawlId, created, admitted };
}

/** The page URLs of the sitemaps, as frontier candidates: a URL on a host outside the crawl's scope is skipped. */
async function sitemapCandidates(ctx: FleetContext, spider: Spider, sitemaps: string[]): Promise<Candidate[]> {
  const lookup = makeLookup(parseHostResolve(ctx.env.hostResolve), spider.allowPrivateAddresses);
  const found = await collectSitemapUrls(sitemaps, {
    spider,
    userAgent: new UserAgentRotation(ctx.env.userAgents).pick(spider.userAgents),
    log: ctx.log,
    ...(lookup ? { lookup } : {}),
  });
  const allowed = allowedHosts(spider);
  const candidates: Candidate[] = [];
  for (const raw of found) {
    const url = canonicalizeUrl(raw);
    if (url) candidates.push({ url, depth: 0, verdict: hostAllowed(url, allowed) ? 'admit' : 'out-of-scope' });
  }
  return candidates;
}
