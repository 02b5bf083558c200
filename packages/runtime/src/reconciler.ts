import { randomUUID } from 'node:crypto';
import { STAGES, errorMessage, type Stage } from '@crawlfleet/core';
import { listCrawlIds, loadCrawl, promoteParked, reconcileCrawl, frontierTake, takeFromFrontier } from '@crawlfleet/crawl';
import type { FleetContext } from './context.js';

/**
 * Runs the reconciler (packages/crawl/src/reconcile.ts) in the background of every worker process;
 * a lock lets one process of the fleet run it at a time. A full check reads every pending id, so
 * it runs only for a crawl that may have lost a job:
 * - the pending sets of the running crawls hold more ids than the stage's queue holds live jobs;
 * - or the crawl made no progress (counters and pending sizes unchanged) for the grace period;
 * - or it has suspects to settle, or a seeding run in progress.
 * A running crawl that still has jobs parked from a pause (a resume that died half-way) gets them
 * promoted, and one whose frontier holds URLs while its window has room (no fetch job finished to
 * take them: a fetcher died after a take) gets them taken.
 */
export function startReconciler(ctx: FleetContext, options: { intervalMs?: number; graceMs?: number } = {}): () => void {
  const intervalMs = options.intervalMs ?? ctx.env.reconcileIntervalMs;
  const graceMs = options.graceMs ?? ctx.env.reconcileGraceMs;
  const owner = randomUUID();
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    reconcileOnce(ctx, owner, intervalMs, graceMs)
      .catch((err: unknown) => ctx.log.debug({ err: errorMessage(err) }, 'reconciler: this round failed (Redis unreachable?)'))
      .finally(() => {
        busy = false;
      });
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** Live jobs of a stage's queue: every state in which a job will still run. */
const LIVE_STATES = ['active', 'waiting', 'delayed', 'prioritized', 'waiting-children'] as const;

async function reconcileOnce(ctx: FleetContext, owner: string, intervalMs: number, graceMs: number): Promise<void> {
  const { redis, keys } = ctx;
  const lock = keys.reconciler();
  // The lock is left to expire: the fleet runs one round per interval, however many processes tick.
  if ((await redis.set(lock.lock, owner, 'PX', Math.max(intervalMs - 100, 100), 'NX')) !== 'OK') return;
  const crawlIds = await listCrawlIds(redis, keys);
  // One round trip per crawl, all at once: a crawl's keys share its slot, two crawls' may not.
  const crawls = await Promise.all(
    crawlIds.map(async (crawlId) => {
      const k = keys.crawl(crawlId);
      const pipeline = redis.pipeline();
      pipeline.hget(k.meta, 'state');
      for (const stage of STAGES) pipeline.scard(k.pending[stage]);
      pipeline.hlen(k.seeding);
      pipeline.hlen(k.suspects);
      pipeline.hgetall(k.counters);
      for (const stage of STAGES) pipeline.scard(k.parked[stage]);
      pipeline.llen(k.frontier);
      const r = ((await pipeline.exec()) ?? []).map((result) => result[1]);
      return {
        crawlId,
        state: r[0] as string | null,
        pending: Object.fromEntries(STAGES.map((s, j) => [s, Number(r[1 + j])])) as Record<Stage, number>,
        seeding: Number(r[4]),
        suspects: Number(r[5]),
        counters: r[6] as Record<string, string>,
        parked: STAGES.reduce((n, _s, j) => n + Number(r[7 + j]), 0),
        frontier: Number(r[10]),
      };
    }),
  );
  // Ids that no live job may carry: more pending (in running and paused crawls) than live jobs.
  const short = new Set<Stage>();
  for (const stage of STAGES) {
    const counts = await ctx.queues[stage].getJobCounts(...LIVE_STATES);
    const live = Object.values(counts).reduce((a, b) => a + b, 0);
    const pending = crawls.filter((c) => c.state === 'running' || c.state === 'paused').reduce((n, c) => n + c.pending[stage] - (stage === 'fetch' ? c.seeding : 0), 0);
    if (pending > live) short.add(stage);
  }
  const now = Date.now();
  for (const c of crawls) {
    if (c.state !== 'running') continue;
    if (c.parked > 0) {
      const promoted = await promoteParked(redis, keys, ctx.queues, c.crawlId);
      if (promoted > 0) ctx.log.info({ crawlId: c.crawlId, promoted }, 'reconciler: promoted jobs parked by a pause of a crawl that runs again');
    }
    if (c.frontier > 0 && c.pending.fetch < ctx.env.frontierWindow) {
      const crawl = await loadCrawl(redis, keys, c.crawlId);
      const taken = crawl ? await takeFromFrontier(redis, keys, ctx.queues, c.crawlId, crawl.spider, frontierTake(ctx.env.frontierWindow)) : 0;
      if (taken > 0) ctx.log.info({ crawlId: c.crawlId, taken }, 'reconciler: took URLs from the frontier into the fetch stage, whose window had room');
    }
    const total = STAGES.reduce((n, s) => n + c.pending[s], 0);
    if (total === 0) continue;
    const signature = JSON.stringify([c.pending, c.counters]);
    const previous = await redis.hget(lock.progress, c.crawlId);
    const [prevSignature, sinceText] = previous ? [previous.slice(0, previous.lastIndexOf('|')), previous.slice(previous.lastIndexOf('|') + 1)] : [undefined, undefined];
    const stuck = prevSignature === signature && now - Number(sinceText) >= graceMs;
    if (prevSignature !== signature) await redis.hset(lock.progress, c.crawlId, `${signature}|${now}`);
    const suspect = STAGES.some((s) => short.has(s) && c.pending[s] > 0);
    if (!stuck && !suspect && c.suspects === 0 && c.seeding === 0) continue;
    const crawl = await loadCrawl(redis, keys, c.crawlId);
    if (!crawl) continue;
    const report = await reconcileCrawl(redis, keys, ctx.queues, crawl, { graceMs, log: ctx.log, nowMs: now });
    const acted = report.rebuilt + report.deadLettered + report.sentinelsCleared;
    ctx.log[acted > 0 ? 'info' : 'debug']({ crawlId: c.crawlId, stuck, ...report }, 'reconciler: checked the pending jobs of a crawl');
  }
  // Crawls that are gone or ended leave no progress record behind.
  const running = new Set(crawls.filter((c) => c.state === 'running').map((c) => c.crawlId));
  const recorded = await redis.hkeys(lock.progress);
  const stale = recorded.filter((id) => !running.has(id));
  if (stale.length > 0) await redis.hdel(lock.progress, ...stale);
}
