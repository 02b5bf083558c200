import { hostLimits, renderModeFor, renderSettings, runScript, type RenderSettings, type FetchJob, type Keys, type Queues, type Spider, type RedisClient } from '@crawlfleet/core';
import { admitToPartition, takenRequests, uniqueCandidates, type AdmissionPolicy, type Candidate, type FetchRequest, type FrontierTake, type TakenRequest } from '@crawlfleet/frontier';
import type { JobsOptions } from 'bullmq';
import { allPartKeys, partOfUrl, type CrawlLayout } from './layout.js';
import type { SettledUrls } from './settled-urls.js';

export { frontierTake } from '@crawlfleet/frontier';

/**
 * URLs per admission script call. One script call holds Redis for every client while it runs; 1,000
 * URLs keep that to a millisecond or two, where a page's 100,000 links in one call would stall the
 * whole fleet (and overflow the call's argument list).
 */
export const ADMIT_CHUNK = 1000;

/** Admission calls in flight at once: this process prepares the next while Redis runs the last. */
const ADMIT_LANES = 2;

/** What an admission changed in the crawl's counters: URLs newly seen, and the change to skipped. */
export type AdmissionCounts = { seen: number; skipped: number };

/** Pure: a fetch job's payload from the request the frontier kept. */
export function fetchJobData(crawlId: string, r: FetchRequest): FetchJob {
  return {
    crawlId,
    url: r.url,
    depth: r.depth,
    ...(r.referer ? { referer: r.referer } : {}),
    ...(r.redirects ? { redirects: r.redirects } : {}),
    ...(r.meta ? { meta: r.meta } : {}),
    ...(r.lastmod ? { lastmod: r.lastmod } : {}),
    ...(r.known ? { known: r.known } : {}),
  };
}

/** A fetch job's options: the spider's retries, crawlfleet's backoff. */
export function fetchJobOptions(spider: Spider): JobsOptions {
  return { attempts: spider.retry.attempts + 1, backoff: { type: 'crawlfleet' } };
}

/** Pure: what admission reads of a spider (its budgets and each host's concurrency and delay). */
export function admissionPolicy(spider: Spider): AdmissionPolicy {
  return {
    maxPages: spider.maxPages,
    maxPagesPerHost: spider.limits.maxPagesPerHost,
    hostLimits: (host) => hostLimits(spider, host),
  };
}

/**
 * Adds the fetch jobs of requests that are pending already (taken from the frontier, or admitted
 * earlier and enqueued again: the job id makes that a no-op unless the job was lost). A request
 * whose host's turn is later waits in BullMQ's delayed set until then.
 */
export async function enqueueFetches(queues: Queues, crawlId: string, spider: Spider, requests: TakenRequest[]): Promise<void> {
  if (requests.length === 0) return;
  const opts = fetchJobOptions(spider);
  const settings = renderSettings(spider);
  const byQueue = { fetch: [] as TakenRequest[], render: [] as TakenRequest[] };
  for (const t of requests) byQueue[fetchQueueFor(settings, t.request.url)].push(t);
  await Promise.all(
    (['fetch', 'render'] as const)
      .filter((name) => byQueue[name].length > 0)
      .map((name) =>
        queues[name].addBulk(byQueue[name].map((t) => ({ name, data: fetchJobData(crawlId, t.request), opts: { ...opts, jobId: t.jobId, ...(t.delayMs > 0 ? { delay: t.delayMs } : {}) } }))),
      ),
  );
}

/**
 * Pure: the queue a URL's fetch job goes to: `render` when the spider renders it always (a browser
 * loads it, and nothing fetches it first); `fetch` otherwise, `auto` included: the fetcher fetches
 * the plain page and sends it on to render if it needs to.
 */
export function fetchQueueFor(settings: Pick<RenderSettings, 'mode' | 'rules'>, url: string): 'fetch' | 'render' {
  return renderModeFor(settings, url) === 'always' ? 'render' : 'fetch';
}

/** Pure: whether a URL's fetch job may be in the render queue though fetchQueueFor says `fetch` (render "auto"). */
function mayBeRerouted(settings: Pick<RenderSettings, 'mode' | 'rules'>, url: string): boolean {
  return renderModeFor(settings, url) === 'auto';
}

/**
 * Of the fetch jobs to enqueue again (URLs found again while pending: a no-op while the job exists,
 * a rebuild of a lost one), those to add. A page of `render: "auto"` judged to need a browser went
 * on from the fetch queue to the render queue under the same id, pending all the while: adding it to
 * the fetch queue then would make a copy that fetches it plain beside the render job, under the same
 * host lease. So such a job is enqueued again only when neither queue holds it. The fetch queue is
 * read first: a reroute adds the render job before its fetch job completes, so one read finds it.
 */
async function notInAnyQueue(redis: RedisClient, queues: Queues, spider: Spider, again: TakenRequest[]): Promise<TakenRequest[]> {
  const settings = renderSettings(spider);
  const open = again.filter((t) => mayBeRerouted(settings, t.request.url));
  if (open.length === 0) return again;
  const held = new Set<string>();
  for (const queue of [queues.fetch, queues.render]) {
    const ids = open.filter((t) => !held.has(t.jobId)).map((t) => t.jobId);
    for (const [i, exists] of (await jobsExist(redis, queue, ids)).entries()) if (exists) held.add(ids[i]!);
  }
  return again.filter((t) => !held.has(t.jobId));
}

/** Whether each job id has a job in the queue (one pipeline; a queue's keys share one slot). */
async function jobsExist(redis: RedisClient, queue: Queues['fetch'], ids: string[]): Promise<boolean[]> {
  if (ids.length === 0) return [];
  const pipeline = redis.pipeline();
  for (const id of ids) pipeline.exists(queue.toKey(id));
  const replies = (await pipeline.exec()) ?? [];
  return replies.map(([err, n]) => {
    if (err) throw err;
    return n === 1;
  });
}

/** One URL's fetch job, in the queue its render mode picks (a rebuild, a replay). */
export async function enqueueFetch(queues: Queues, crawlId: string, spider: Spider, id: string, request: FetchRequest): Promise<void> {
  await enqueueFetches(queues, crawlId, spider, [{ jobId: id, delayMs: 0, request }]);
}

/** Pure: candidates by partition (their host's), each partition's in the order found. */
export function byPartition(layout: CrawlLayout, candidates: readonly Candidate[]): Candidate[][] {
  const parts: Candidate[][] = Array.from({ length: layout.parts }, () => []);
  for (const c of candidates) parts[partOfUrl(layout, c.url)]!.push(c);
  return parts;
}

/**
 * Admits URLs to the crawl's frontier, into their hosts' queues, a chunk of one partition at a time,
 * and enqueues what each admission took from the partition's ready hosts into the fetch stage. The
 * rest wait in their hosts' queues until finished fetch jobs make room and their hosts' turns come
 * (finishJob-12.lua), or the reconciler takes them.
 */
export async function admitAndEnqueue(
  redis: RedisClient,
  keys: Keys,
  queues: Queues,
  crawl: CrawlLayout & { spider: Spider },
  candidates: Candidate[],
  options: { take: FrontierTake; referer?: string; settled?: { urls: SettledUrls; scope: string } },
): Promise<AdmissionCounts> {
  const { spider, crawlId } = crawl;
  const settled = options.settled;
  const unique = settled ? settled.urls.unsettled(settled.scope, uniqueCandidates(candidates)) : uniqueCandidates(candidates);
  const counts = { seen: 0, skipped: 0 };
  const referer = options.referer;
  const policy = admissionPolicy(spider);
  const parts = allPartKeys(keys, crawl);
  const chunks: { part: number; list: Candidate[] }[] = [];
  byPartition(crawl, unique).forEach((list, part) => {
    for (let i = 0; i < list.length; i += ADMIT_CHUNK) chunks.push({ part, list: list.slice(i, i + ADMIT_CHUNK) });
  });
  const admitChunk = async ({ part, list }: { part: number; list: Candidate[] }) => {
    const chunk = referer ? list.map((c) => ({ ...c, referer })) : list;
    const { admitted, taken, skipped } = await admitToPartition(redis, parts[part]!, crawlId, chunk, policy, options.take, crawl.startedAt);
    settled?.urls.settle(settled.scope, chunk);
    const again = admitted
      .filter((a) => !a.isNew)
      .map((a) => ({
        jobId: a.jobId,
        delayMs: 0,
        request: {
          url: a.url,
          depth: a.depth,
          ...(a.redirects ? { redirects: a.redirects } : {}),
          ...(referer ? { referer } : {}),
          ...(a.meta ? { meta: a.meta } : {}),
          ...(a.lastmod ? { lastmod: a.lastmod } : {}),
          ...(a.known ? { known: a.known } : {}),
        },
      }));
    await enqueueFetches(queues, crawlId, spider, [...(await notInAnyQueue(redis, queues, spider, again)), ...taken]);
    counts.seen += admitted.filter((a) => a.isNew).length;
    counts.skipped += skipped;
  };
  // Each chunk's admission is atomic on its own, so their order does not matter.
  let next = 0;
  const lane = async () => {
    while (next < chunks.length) await admitChunk(chunks[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(ADMIT_LANES, chunks.length) }, lane));
  return counts;
}

/**
 * Feeds the fetch stage from every partition's ready hosts while its window has room, and enqueues
 * what was taken: after a resume, and as the reconciler's backstop. Returns how many.
 */
export async function takeFromFrontier(redis: RedisClient, keys: Keys, queues: Queues, crawl: CrawlLayout & { spider: Spider }, take: FrontierTake): Promise<number> {
  const counts = await Promise.all(
    allPartKeys(keys, crawl).map(async (k) => {
      let total = 0;
      for (;;) {
        const taken = takenRequests(
          await runScript<string[]>(redis, 'takeReady', [k.part, k.pending.fetch, k.requests, k.hosts, k.ready, k.backlog], [take.window, take.minBatch, take.horizonMs, k.hostQueue, crawl.crawlId]),
        );
        if (taken.length === 0) return total;
        await enqueueFetches(queues, crawl.crawlId, crawl.spider, taken);
        total += taken.length;
      }
    }),
  );
  return counts.reduce((a, b) => a + b, 0);
}
