import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { ConfigError, type SinkSpec, type Spider, type SpiderModuleRef } from '@crawlfleet/core';
import { SENTINEL_PREFIX, admitAndEnqueue, checkDone, finishJob, newCrawlId, registerCrawl, type AdmissionCounts } from '@crawlfleet/crawl';
import { UserAgentRotation, collectSitemapUrls, makeLookup, parseHostResolve } from '@crawlfleet/fetch';
import { allowedHosts, canonicalizeUrl, frontierTake, hostAllowed, type Candidate } from '@crawlfleet/frontier';
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

export async function readUrlsFile(file: string): Promise<string[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`${file}: cannot read URLs file: ${(err as Error).message}`, { file, cause: err });
  }
  const urls: string[] = [];
  text.split('\n').forEach((line, i) => {
    const trimmed = line.trim();
    if (trimmed && !trimmed.startsWith('#')) urls.push(canonicalSeed(trimmed, `${file}:${i + 1}`));
  });
  return urls;
}

/**
 * Registers a crawl (the spider and sink stored in Redis) and enqueues its start URLs and any others
 * given. Seeds are admitted whatever their host: naming a URL is asking for it. Seeding an existing
 * crawl again resumes it; URLs already fetched are not fetched again.
 */
export async function seedCrawl(ctx: FleetContext, options: SeedOptions): Promise<SeedResult> {
  const { spider } = options;
  const urls = [
    ...spider.startUrls.map((u, i) => canonicalSeed(u, `startUrls[${i}]`)),
    ...(options.urls ?? []).map((u) => canonicalSeed(u, 'URL argument')),
    ...(options.urlsFile ? await readUrlsFile(options.urlsFile) : []),
  ];
  const sitemaps = [...(spider.sitemapUrls ?? []), ...(options.sitemaps ?? []).map((u) => canonicalSeed(u, '--sitemap'))];
  if (urls.length === 0 && sitemaps.length === 0) throw new ConfigError(`spider "${spider.name}" has no startUrls and no URLs were given`);
  // Read the sitemaps before registering: one that cannot be read fails the seed, leaving no crawl behind.
  const fromSitemaps = sitemaps.length > 0 ? await sitemapCandidates(ctx, spider, sitemaps) : [];
  const crawlId = options.crawlId ?? newCrawlId(spider.name);
  const created = await registerCrawl(ctx.redis, ctx.keys, crawlId, spider, options.sink(crawlId), options.module);
  const candidates: Candidate[] = [...urls.map((url) => ({ url, depth: 0, verdict: 'admit' as const })), ...fromSitemaps];
  const { seen: admitted } = await whileSeeding(ctx, crawlId, () => admitAndEnqueue(ctx.redis, ctx.keys, ctx.queues, crawlId, spider, candidates, { take: frontierTake(ctx.env.frontierWindow) }));
  await checkDone(ctx.redis, ctx.keys, crawlId);
  ctx.log.info({ crawlId, created, admitted, seeds: urls.length, fromSitemaps: fromSitemaps.length }, created ? 'crawl registered' : 'crawl resumed');
  return { crawlId, created, admitted };
}

/** How long a seeding run's sentinel lasts unless renewed: a seeder that died lets go after this. */
const SEEDING_LEASE_MS = 60_000;

/**
 * Seeds are admitted and enqueued 1,000 at a time, and fast workers may finish the first thousand
 * before the second is admitted: the crawl would be marked done and the rest dropped. A sentinel id
 * in the fetch pending set holds the crawl open until seeding ends. It is renewed while seeding
 * runs; the reconciler removes the sentinel of a seeder that died.
 */
async function whileSeeding(ctx: FleetContext, crawlId: string, seed: () => Promise<AdmissionCounts>): Promise<AdmissionCounts> {
  const k = ctx.keys.crawl(crawlId);
  const run = randomUUID();
  const sentinel = `${SENTINEL_PREFIX}${run}`;
  await ctx.redis
    .multi()
    .hset(k.seeding, run, Date.now() + SEEDING_LEASE_MS)
    .sadd(k.pending.fetch, sentinel)
    .exec();
  const renew = setInterval(() => {
    ctx.redis.hset(k.seeding, run, Date.now() + SEEDING_LEASE_MS).catch(() => undefined);
  }, SEEDING_LEASE_MS / 4);
  try {
    return await seed();
  } finally {
    clearInterval(renew);
    await ctx.redis.hdel(k.seeding, run);
    // finishJob removes the sentinel and marks the crawl done if the seeds are all finished already.
    await finishJob(ctx.redis, ctx.keys, crawlId, 'fetch', sentinel);
  }
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
