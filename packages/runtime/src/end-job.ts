import { DelayedError, UnrecoverableError, type Job } from 'bullmq';
import { RENDER_QUEUE, errorMessage, fingerprintOfJob, type Stage } from '@crawlfleet/core';
import {
  STAGE_DONE_STATE,
  crawlTake,
  deadLetterData,
  deadLetterFailed,
  delayJob,
  enqueueFetches,
  finishJob,
  finishJobTaking,
  parkForPause,
  type CrawlRecord,
  type DeadLetter,
  type FinishInput,
} from '@crawlfleet/crawl';
import type { CrawlBacklogs } from './backpressure.js';
import type { FleetContext } from './context.js';
import type { JobEnding } from './job-ending.js';
import { inJobPartition, type HandOver, type StageResult } from './stage-result.js';

/**
 * A job that began before the job handing it its URL had finished (its add comes just before that
 * finish) is parked for this long once it has waited in its worker (EARLY_WAITS_MS in
 * stage-worker.ts): the job before it is slow to finish (Redis is slow, or its worker died: then its
 * re-run hands this one over).
 */
const EARLY_RETRY_MS = 1000;

/** The job being ended, as far as it is known: a poison job has no valid data and no crawl yet, a dropped one maybe no crawl. */
export interface JobAtHand {
  job: Job;
  token?: string;
  /** the job's URL ('' for a poison job without one) */
  url: string;
  /** the job's data, validated (a poison job's as it came) */
  data: unknown;
  crawl?: CrawlRecord;
}

export type EndJob = (at: JobAtHand, ending: JobEnding) => Promise<void>;

/**
 * Ends a job the harness dead-lettered in BullMQ's failed set, not retried: the reason alone, since a
 * stack of the harness tells nothing. Its own class, so that BullMQ's `failed` event can tell it from
 * a failure the harness did not record (stage-worker.ts).
 */
export class DeadLetteredError extends UnrecoverableError {
  constructor(reason: string) {
    super(reason);
    this.stack = `UnrecoverableError: ${reason}`;
  }
}

function crawlOf(at: JobAtHand): CrawlRecord {
  if (!at.crawl) throw new Error(`job ${at.job.id} has no crawl to end in`);
  return at.crawl;
}

/**
 * The one place a stage's job ends: which Lua script runs (finishJob, delayJob, parkForPause's,
 * deadLetterFailed's), what BullMQ is told (moved to delayed, failed for good), and what is counted,
 * for each way of ending. A case that must end the run in BullMQ other than as completed throws
 * (DelayedError, or the error BullMQ retries or fails the job with), as BullMQ's processors do.
 */
export function jobEnder(ctx: FleetContext, stage: Stage, holdBack?: CrawlBacklogs): EndJob {
  const ender = new JobEnder(ctx, stage, holdBack);
  return (at, ending) => ender.end(at, ending);
}

class JobEnder {
  constructor(
    private readonly ctx: FleetContext,
    private readonly stage: Stage,
    private readonly holdBack: CrawlBacklogs | undefined,
  ) {}

  async end(at: JobAtHand, ending: JobEnding): Promise<void> {
    switch (ending.kind) {
      case 'done':
        return this.finishDone(at, ending.result);
      case 'rerouted':
        return this.reroute(at);
      case 'early':
        return this.delay(at, EARLY_RETRY_MS);
      case 'taken-again':
        this.ctx.log.warn({ stage: this.stage, jobId: at.job.id, url: at.url, waitMs: ending.waitMs }, 'job taken again while its earlier run goes on here (its lock lapsed): parked');
        return this.delay(at, ending.waitMs);
      case 'parked':
        await parkForPause(this.ctx.redis, this.ctx.keys, crawlOf(at), this.stage, at.job, at.token, at.url);
        throw new DelayedError();
      case 'deferred':
        return this.delay(at, ending.waitMs, 'deferred');
      case 'retried':
        return this.retry(at, ending.error);
      case 'dead':
        return this.finishDead(at, ending);
      case 'poison':
        return this.finishPoison(at, ending.reason);
      case 'abandoned':
        await finishJob(this.ctx.redis, this.ctx.keys, crawlOf(at), this.stage, at.job.id!, at.url);
        return;
      case 'dropped':
        if (ending.why === 'stale') this.ctx.log.info({ stage: this.stage, url: at.url, crawlId: at.crawl?.crawlId }, ending.message);
        return;
      case 'moved':
        throw ending.error;
      case 'failed-by-bullmq':
        return this.failedByBullMQ(at, ending.code, ending.reason);
    }
  }

  private async finishDone(at: JobAtHand, result: StageResult): Promise<void> {
    // The stage's done marker: a job of this stage for this URL is never enqueued again.
    const { handOver: given, reroute: _reroute, ...effects } = result;
    const url = { fingerprint: fingerprintOfJob(at.job.id!), state: STAGE_DONE_STATE[this.stage] };
    await this.finish(at, { url, ...effects }, result.counters, inJobPartition(given, at.url));
  }

  private async finishDead(at: JobAtHand, ending: Extract<JobEnding, { kind: 'dead' }>): Promise<void> {
    const { code, reason } = ending;
    // A give-up keeps its effects, and its hand-over (a failed page's exchange, to be archived).
    const { handOver: given, ...extra } = ending.result;
    // An HTTP error page is routine on real sites; anything else deserves a look.
    this.ctx.log[code === 'ERR_HTTP_STATUS' ? 'debug' : 'warn']({ stage: this.stage, url: at.url, code, reason }, 'dead-lettered');
    const counters = { ...extra.counters, failed: 1 };
    const dead = this.deadLetter(at, code, reason);
    await this.finish(at, { ...extra, counters, dead }, counters, inJobPartition(given, at.url), () => this.ctx.metrics.deadLetter(this.stage, code));
    // BullMQ's own failed set keeps it too, with the reason, for Bull Board; it is not retried.
    throw new DeadLetteredError(`${code}: ${reason}`);
  }

  /** finishJob with the effects (and the fetch stage's take); when this finish was the first, the counts and the hand-over; then the fetches taken. */
  private async finish(at: JobAtHand, input: FinishInput, counters: StageResult['counters'], handOver: HandOver | undefined, onFirst = () => {}): Promise<void> {
    const { redis, keys, metrics, queues } = this.ctx;
    const crawl = crawlOf(at);
    // A finished fetch job gives its host's turn back and makes room in its partition's window.
    const take = this.stage === 'fetch' ? { take: crawlTake(this.ctx.env.frontierWindow, crawl, crawl.spider) } : {};
    const finishing = { ...input, ...take, ...(handOver ? { handedOver: handOver.id } : {}) };
    const { outcome, taken } = await finishJobTaking(redis, keys, crawl, this.stage, at.job.id!, at.url, finishing);
    if (outcome !== 'already') {
      metrics.count(counters ?? {});
      onFirst();
      // The next stage's job is pending now (the finish), so it is added only now: it can never start
      // before its hand-over is recorded. A process that dies in between leaves it pending without a
      // job: the reconciler redoes its URL.
      if (handOver) await this.addHandOver(crawl.crawlId, handOver);
    }
    await enqueueFetches(queues, crawl.crawlId, crawl.spider, taken);
  }

  private async addHandOver(crawlId: string, handOver: HandOver): Promise<void> {
    await this.ctx.queues[handOver.stage].add(handOver.stage, handOver.data, { ...handOver.opts, jobId: handOver.id });
    if (this.holdBack?.downstream === handOver.stage) this.holdBack.handedOver(crawlId);
  }

  /** Logged and counted first; then, when its data names a known crawl, finished there with its dead letter. */
  private async finishPoison(at: JobAtHand, reason: string): Promise<void> {
    this.ctx.log.warn({ stage: this.stage, jobId: at.job.id, reason }, 'poison job dead-lettered');
    this.ctx.metrics.deadLetter(this.stage, 'ERR_INVALID_JOB');
    const crawlId = typeof at.job.data?.crawlId === 'string' ? (at.job.data.crawlId as string) : undefined;
    const known = crawlId ? await this.ctx.crawls.get(crawlId).catch(() => undefined) : undefined;
    if (known) {
      const dead = this.deadLetter(at, 'ERR_INVALID_JOB', reason);
      const finished = await finishJob(this.ctx.redis, this.ctx.keys, known, this.stage, at.job.id!, at.url, { counters: { failed: 1 }, dead });
      if (finished !== 'already') this.ctx.metrics.count({ failed: 1 });
    }
    // BullMQ's failed set keeps it with the reason (the only record of it without a crawl).
    throw new DeadLetteredError(reason);
  }

  private deadLetter(at: JobAtHand, code: string, reason: string): DeadLetter {
    const attempts = at.job.attemptsMade + 1;
    return { url: at.url, stage: this.stage, reason, code, attempts, at: new Date().toISOString(), data: deadLetterData(this.stage, at.data as never) };
  }

  /**
   * The job goes on in the render queue, under the same id and still pending in this stage: nothing
   * is finished. Should this process die before BullMQ completes this one, its re-run adds the same
   * id again (a no-op while it waits), or begins after the render job finished and is dropped.
   */
  private async reroute(at: JobAtHand): Promise<void> {
    await this.ctx.queues.render.add(RENDER_QUEUE, at.data as never, { attempts: at.job.opts.attempts ?? 1, backoff: { type: 'crawlfleet' }, jobId: at.job.id! });
  }

  /** Parked in BullMQ's delayed set: the slot is free at once, and no attempt is used up. `counter`: recorded in the partition and counted. */
  private async delay(at: JobAtHand, waitMs: number, counter?: 'deferred'): Promise<never> {
    if (counter && (await delayJob(this.ctx.redis, this.ctx.keys, crawlOf(at), this.stage, at.job.id!, at.url, counter))) this.ctx.metrics.count({ [counter]: 1 });
    await at.job.moveToDelayed(Date.now() + waitMs, at.token);
    throw new DelayedError();
  }

  /** Recorded delayed in the partition; BullMQ retries it after its backoff (the error thrown). */
  private async retry(at: JobAtHand, error: unknown): Promise<never> {
    if (await delayJob(this.ctx.redis, this.ctx.keys, crawlOf(at), this.stage, at.job.id!, at.url, 'retries')) this.ctx.metrics.count({ retries: 1 });
    this.ctx.log.debug({ stage: this.stage, url: at.url, attempt: at.job.attemptsMade + 1, err: errorMessage(error) }, 'will retry');
    throw error;
  }

  private async failedByBullMQ(at: JobAtHand, code: string, reason: string): Promise<void> {
    const { redis, keys, queues, metrics, log } = this.ctx;
    const finished = await deadLetterFailed(redis, keys, queues, crawlOf(at), this.stage, at.job.id!, code, reason);
    if (finished === 'already') return;
    metrics.count({ failed: 1 });
    metrics.deadLetter(this.stage, code);
    log.warn({ stage: this.stage, jobId: at.job.id, url: at.url, code, reason }, 'dead-lettered a job BullMQ failed on its own');
  }
}
