import { DelayedError, UnrecoverableError, Worker, type Job, type JobsOptions } from 'bullmq';
import {
  JOB_HISTORY,
  NonRetryableError,
  RENDER_QUEUE,
  RetryableError,
  SpiderVersionPending,
  StaleRunError,
  errorMessage,
  fingerprintOfJob,
  jobId,
  retryDelay,
  validateJob,
  type JobByStage,
  type LoadedSpiderModule,
  type Stage,
} from '@crawlfleet/core';
import {
  STAGE_DONE_STATE,
  deadLetterData,
  beginJob,
  classifyFinalFailure,
  crawlTake,
  deadLetterFailed,
  delayJob,
  enqueueFetches,
  finishJob,
  finishJobTaking,
  parkForPause,
  type BeginResult,
  type CrawlRecord,
  type FinishInput,
} from '@crawlfleet/crawl';
import { holdBackWaitMs, type CrawlBacklogs } from './backpressure.js';
import { HandlerDeadlineError, withDeadline } from './deadline.js';
import { oneRunPerJob } from './one-run-per-job.js';
import type { FleetContext } from './context.js';

/** The next stage's job for a URL: made pending by the job's finish, then added to its queue. */
export interface HandOver {
  stage: 'parse' | 'write';
  id: string;
  data: JobByStage['parse'] | JobByStage['write'];
  opts: JobsOptions;
}

/** The write job of a URL (its items, its capture, its page record), as a fetch or parse job hands it over. */
export function writeHandOver(ctx: FleetContext, fingerprint: string, data: JobByStage['write']): HandOver {
  return { stage: 'write', id: jobId('write', fingerprint), data, opts: { attempts: ctx.env.writeAttempts, backoff: { type: 'crawlfleet' } } };
}

/**
 * What a stage's handler returns: the effects to record when its job finishes, and the next stage's
 * job (`handOver`), which the harness adds once that finish has made it pending.
 */
export type StageResult = Omit<FinishInput, 'dead' | 'take' | 'handedOver'> & { handOver?: HandOver; reroute?: 'render' };

export interface StageHandlerInput<S extends Stage> {
  job: Job;
  data: JobByStage[S];
  crawl: CrawlRecord;
  /** the URL's fingerprint within the crawl */
  fingerprint: string;
  /** no retry follows this attempt: a handler gives up with its effects (GiveUpError) */
  isLastAttempt: boolean;
  /** how many times this job has been parked before (DeferError, a paused crawl) */
  deferrals: number;
  /** this run of the crawl: its id and registration time (a crawl reset and seeded again is another) */
  incarnation: string;
  /** a code spider's module (stages that run hooks only), the very version the crawl was seeded with */
  spiderModule?: LoadedSpiderModule;
  /** aborted when the handler's deadline has passed: stop, and let go of what it holds */
  signal: AbortSignal;
}

export type StageHandler<S extends Stage> = (input: StageHandlerInput<S>) => Promise<StageResult>;

export interface StageWorkerOptions<S extends Stage> {
  stage: S;
  concurrency: number;
  handler: StageHandler<S>;
  /** attempts for this stage's jobs when the job itself does not say (parse and write: infrastructure failures) */
  defaultAttempts?: number;
  /** the stage runs a code spider's hooks: its jobs load the crawl's module, and a wrong version is dead-lettered */
  runsHooks?: boolean;
  /** a crawl with more jobs than this in the next stage is held back: its jobs here wait (CrawlBacklogs) */
  holdBack?: CrawlBacklogs;
  /** the BullMQ queue served, when not the stage's own: `render`, the fetch stage's jobs that a browser runs */
  queue?: 'render';
  /** the hard deadline of one run of the handler for a crawl's job (ms), from its own timeouts; HANDLER_DEADLINE_MS when not given */
  deadlineMs?: (crawl: CrawlRecord) => number;
}

/**
 * How many times a job may lose its worker before BullMQ fails it (then dead-lettered ERR_STALLED).
 * A stall is either a poison job that crashes its worker every time or bad luck: a worker killed
 * (a deploy, an OOM elsewhere, a node lost) while the job ran. The limit must be high enough that
 * bad luck never reaches it (the chaos suite kills a worker every 1-2 s), and low enough that a poison
 * page stops crash-looping its parser soon. A write job is idempotent and holds no page, so it is
 * never the cause of its worker's death: it may stall far more often.
 */
const MAX_STALLED_COUNT: Record<Stage, number> = { fetch: 10, parse: 10, write: 50 };

/**
 * A job that began before the job handing it its URL had finished (its add comes just before that
 * finish) is parked for this long once it has waited EARLY_WAITS_MS in its worker: the job before it
 * is slow to finish (Redis is slow, or its worker died: then its re-run hands this one over).
 */
const EARLY_RETRY_MS = 1000;
/** How long a job that began early waits in its worker for the hand-over, before it is parked instead. */
const EARLY_WAITS_MS = [10, 40, 150];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs one stage on BullMQ. The harness owns the decisions every stage shares:
 * - a job that fails its schema is poison: dead-lettered with the reason, and the worker goes on;
 * - a job of a crawl that is gone, cancelled or finished is dropped; of a paused crawl, parked;
 * - a RetryableError is retried with backoff while attempts remain; anything else, or the last
 *   attempt, ends in the dead-letter set;
 * - the job is acknowledged only after finishJob recorded its effects (at-least-once, applied once).
 */
export function createStageWorker<S extends Stage>(ctx: FleetContext, options: StageWorkerOptions<S>): Worker {
  const { stage, handler } = options;
  const { redis, keys, log, metrics } = ctx;
  // A finished fetch job gives its host's turn back and makes room in its partition's window.
  const takeFor = (crawl: CrawlRecord) => (stage === 'fetch' ? { take: crawlTake(ctx.env.frontierWindow, crawl, crawl.spider) } : {});

  const processor = async (job: Job, token?: string): Promise<void> => {
    const id = job.id!;
    const checked = validateJob(stage, job.data);
    const crawlId = typeof job.data?.crawlId === 'string' ? (job.data.crawlId as string) : undefined;
    if (!checked.ok) {
      log.warn({ stage, jobId: id, reason: checked.reason }, 'poison job dead-lettered');
      metrics.deadLetter(stage, 'ERR_INVALID_JOB');
      const known = crawlId ? await ctx.crawls.get(crawlId).catch(() => undefined) : undefined;
      if (known) {
        const finished = await finishJob(redis, keys, known, stage, id, String(job.data?.url ?? ''), {
          counters: { failed: 1 },
          dead: {
            url: String(job.data?.url ?? ''),
            stage,
            reason: checked.reason,
            code: 'ERR_INVALID_JOB',
            attempts: job.attemptsMade + 1,
            at: new Date().toISOString(),
            data: deadLetterData(stage, job.data),
          },
        });
        if (finished !== 'already') metrics.count({ failed: 1 });
      }
      // BullMQ's failed set keeps it with the reason (the only record of it without a crawl).
      throw deadLetterError(checked.reason);
    }
    const data = checked.job;
    const started = await begin(data.crawlId, id, data.url);
    if (!started) return;
    const { crawl, begun } = started;
    if (begun.state === 'early') {
      // Its hand-over has not been recorded yet (the job before it is still finishing): come back.
      await job.moveToDelayed(Date.now() + EARLY_RETRY_MS, token);
      throw new DelayedError();
    }
    if (begun.state === 'unknown' || begun.state === 'finished') return;
    if (begun.state === 'paused') {
      await parkForPause(redis, keys, crawl, stage, job, token, data.url);
      throw new DelayedError();
    }
    // Work that arrives after done is not run, and not finished either: a job still pending in a
    // done crawl lost its finish to a failover, and the reconciler runs the crawl again for it.
    if (begun.state === 'done') return;
    if (begun.state !== 'running') {
      await finishJob(redis, keys, crawl, stage, id, data.url);
      return;
    }
    const fingerprint = fingerprintOfJob(id);
    const attempts = job.opts.attempts ?? options.defaultAttempts ?? 1;
    // Every start of a job counts in attemptsStarted; only failures count in attemptsMade.
    const deferrals = Math.max(0, (job.attemptsStarted ?? 1) - job.attemptsMade - 1);
    try {
      const backlog = options.holdBack ? await options.holdBack.over(crawl) : undefined;
      if (backlog !== undefined) {
        throw new DeferError(
          holdBackWaitMs(deferrals),
          `crawl ${data.crawlId} has ${backlog} ${options.holdBack!.downstream} jobs waiting (over ${options.holdBack!.highWater}): held back until they drain`,
        );
      }
      const spiderModule = options.runsHooks && crawl.module ? await ctx.spiderModules.get(crawl.module) : undefined;
      // A handler that never returns would hold its slot for ever (BullMQ renews the lock): past its
      // deadline it is told to stop and the job fails, to be retried or dead-lettered like any failure.
      const deadlineMs = options.deadlineMs ? options.deadlineMs(crawl) : ctx.env.handlerDeadlineMs;
      const result = await withDeadline(
        deadlineMs,
        (signal) =>
          handler({
            job,
            data,
            crawl,
            fingerprint,
            isLastAttempt: job.attemptsMade + 1 >= attempts,
            deferrals,
            incarnation: `${data.crawlId}@${begun.startedAt}`,
            ...(spiderModule ? { spiderModule } : {}),
            signal,
          }),
        () => new HandlerDeadlineError(stage, deadlineMs, data.url),
      );
      if (result.reroute) {
        // The job goes on in the render queue, under the same id and still pending in this stage:
        // nothing is finished. Should this process die before BullMQ completes this one, its re-run
        // adds the same id again (a no-op while it waits), or begins after the render job finished
        // and is dropped.
        await ctx.queues.render.add(RENDER_QUEUE, data, { attempts: job.opts.attempts ?? 1, backoff: { type: 'crawlfleet' }, jobId: id });
        return;
      }
      // The stage's done marker: a job of this stage for this URL is never enqueued again.
      const { handOver: given, reroute: _reroute, ...effects } = result;
      const handOver = inJobPartition(given, data.url);
      const finish = { url: { fingerprint, state: STAGE_DONE_STATE[stage] }, ...effects, ...takeFor(crawl), ...(handOver ? { handedOver: handOver.id } : {}) };
      const { outcome, taken } = await finishJobTaking(redis, keys, crawl, stage, id, data.url, finish);
      if (outcome !== 'already') metrics.count(result.counters ?? {});
      // The next stage's job is pending now (the finish), so it is added only now: it can never start
      // before its hand-over is recorded. A process that dies in between leaves it pending without a
      // job: the reconciler redoes its URL.
      if (handOver && outcome !== 'already') await addHandOver(data.crawlId, handOver);
      await enqueueFetches(ctx.queues, data.crawlId, crawl.spider, taken);
    } catch (err) {
      if (err instanceof DelayedError) throw err;
      if (err instanceof StaleRunError) {
        // The crawl was reset under this job: its run is over, and the job ends with nothing recorded.
        log.info({ stage, url: data.url, crawlId: data.crawlId }, err.message);
        return;
      }
      if (err instanceof DeferError || err instanceof SpiderVersionPending) {
        // Parked in BullMQ's delayed set: the slot is free at once, and no attempt is used up.
        if (await delayJob(redis, keys, crawl, stage, id, data.url, 'deferred')) metrics.count({ deferred: 1 });
        await job.moveToDelayed(Date.now() + err.waitMs, token);
        throw new DelayedError();
      }
      const retryable = !(err instanceof NonRetryableError);
      if (retryable && job.attemptsMade + 1 < attempts) {
        if (await delayJob(redis, keys, crawl, stage, id, data.url, 'retries')) metrics.count({ retries: 1 });
        log.debug({ stage, url: data.url, attempt: job.attemptsMade + 1, err: errorMessage(err) }, 'will retry');
        throw err;
      }
      const code = (err as { code?: string }).code ?? 'ERR_UNEXPECTED';
      // A give-up keeps its effects, and its hand-over (a failed page's exchange, to be archived).
      const { handOver: givenHandOver, ...extra }: StageResult = err instanceof GiveUpError ? err.result : {};
      const extraHandOver = inJobPartition(givenHandOver, data.url);
      // An HTTP error page is routine on real sites; anything else deserves a look.
      log[code === 'ERR_HTTP_STATUS' ? 'debug' : 'warn']({ stage, url: data.url, code, reason: errorMessage(err) }, 'dead-lettered');
      const counters = { ...extra.counters, failed: 1 };
      const { outcome: finished, taken } = await finishJobTaking(redis, keys, crawl, stage, id, data.url, {
        ...extra,
        ...takeFor(crawl),
        ...(extraHandOver ? { handedOver: extraHandOver.id } : {}),
        counters,
        dead: {
          url: data.url,
          stage,
          reason: errorMessage(err),
          code,
          attempts: job.attemptsMade + 1,
          at: new Date().toISOString(),
          data: deadLetterData(stage, data),
        },
      });
      if (finished !== 'already') {
        metrics.count(counters);
        metrics.deadLetter(stage, code);
        if (extraHandOver) await addHandOver(data.crawlId, extraHandOver);
      }
      await enqueueFetches(ctx.queues, data.crawlId, crawl.spider, taken);
      // BullMQ's own failed set keeps it too, with the reason, for Bull Board; it is not retried.
      throw deadLetterError(`${code}: ${errorMessage(err)}`);
    }
  };

  const addHandOver = async (crawlId: string, handOver: HandOver) => {
    await ctx.queues[handOver.stage].add(handOver.stage, handOver.data, { ...handOver.opts, jobId: handOver.id });
    if (options.holdBack?.downstream === handOver.stage) options.holdBack.handedOver(crawlId);
  };

  /**
   * Begins a job in its URL's partition. The crawl's record comes from this process's cache; when the
   * partition's copy says the crawl changed (a new spider, or a reset and a new registration), the
   * record is read again, and the begin is repeated if the crawl's partitions moved.
   */
  const begin = async (crawlId: string, id: string, url: string): Promise<{ crawl: CrawlRecord; begun: BeginResult } | undefined> => {
    let crawl = await ctx.crawls.get(crawlId);
    for (let tries = 0; crawl && tries < 2; tries++) {
      let begun = await beginJob(redis, keys, crawl, stage, id, url);
      // The job before it is finishing: its finish, the next thing its worker does, hands this one over.
      for (const waitMs of EARLY_WAITS_MS) {
        if (begun.state !== 'early') break;
        await sleep(waitMs);
        begun = await beginJob(redis, keys, crawl, stage, id, url);
      }
      if (begun.state === 'unknown' && tries === 0) {
        crawl = await ctx.crawls.current(crawlId, '', '');
        continue;
      }
      if (begun.state === 'unknown') return undefined;
      const current = await ctx.crawls.current(crawlId, begun.version, begun.startedAt);
      if (!current) return undefined;
      if (current.parts === crawl.parts) return { crawl: current, begun };
      crawl = current;
    }
    return undefined;
  };

  const served = options.queue === 'render' ? ctx.queues.render : ctx.queues[stage];
  const worker = new Worker(served.name, oneRunPerJob(processor, parkWhileEarlierRuns(ctx, stage)), {
    connection: ctx.redis.duplicate(),
    prefix: options.queue === 'render' ? keys.renderQueuePrefix() : keys.queuePrefix(stage),
    concurrency: options.concurrency,
    lockDuration: ctx.env.lockDurationMs,
    stalledInterval: Math.max(1000, Math.floor(ctx.env.lockDurationMs / 2)),
    maxStalledCount: ctx.env.maxStalledCount ?? MAX_STALLED_COUNT[stage],
    ...JOB_HISTORY[stage],
    settings: {
      backoffStrategy: (attemptsMade: number, _type?: string, err?: Error) => retryDelay(attemptsMade, err instanceof RetryableError ? err.retryAfterMs : undefined),
    },
  });
  worker.on('error', (err) => log.error({ stage, err: { message: err.message } }, 'worker error'));
  // BullMQ fails a job on its own when it stalled more than maxStalledCount times (its worker died
  // on it every time) or when it failed outside our handler's catch: our processor recorded no
  // dead letter, so the job would stay pending and the crawl would never end. Dead-letter it here;
  // for a job the handler dead-lettered already, finishJob is a no-op. The reconciler catches what
  // a process that dies now misses.
  const deadLetterFinalFailure = async (job: Job | undefined, failedReason: string) => {
    const crawlId = job?.data?.crawlId;
    if (!job?.id || typeof crawlId !== 'string' || !job.finishedOn) return;
    const crawl = await ctx.crawls.get(crawlId);
    if (!crawl) return;
    const { code, reason } = classifyFinalFailure(failedReason);
    const finished = await deadLetterFailed(redis, keys, ctx.queues, crawl, stage, job.id, code, reason);
    if (finished === 'already') return;
    metrics.count({ failed: 1 });
    metrics.deadLetter(stage, code);
    log.warn({ stage, jobId: job.id, url: job.data.url, code, reason }, 'dead-lettered a job BullMQ failed on its own');
  };
  worker.on('failed', (job, err) => {
    // Our own dead letters end as UnrecoverableError after finishJob recorded them: nothing to add.
    if (err instanceof UnrecoverableError) return;
    deadLetterFinalFailure(job, errorMessage(err)).catch((e: unknown) => log.warn({ stage, err: errorMessage(e) }, 'could not dead-letter a failed job; the reconciler will'));
  });
  worker.on('stalled', (jobId) => {
    served
      .getJob(jobId)
      .then(async (job) => {
        if (job && (await job.isFailed())) await deadLetterFinalFailure(job, job.failedReason);
      })
      .catch((e: unknown) => log.warn({ stage, err: errorMessage(e) }, 'could not dead-letter a stalled job; the reconciler will'));
  });
  return worker;
}

/**
 * Pure: the hand-over as it must be added: for the URL of the job handing it over. A URL's jobs keep
 * to the partition of the URL it was admitted under in every stage (the finish makes the next job
 * pending there), however the page's final URL differs (a redirect or a script in a browser that
 * landed on another host would otherwise send the next job to another partition, which drops it).
 */
export function inJobPartition(handOver: HandOver | undefined, url: string): HandOver | undefined {
  return handOver && handOver.data.url !== url ? { ...handOver, data: { ...handOver.data, url } } : handOver;
}

/** Ends a dead-lettered job in BullMQ's failed set: the reason alone, since a stack of the harness tells nothing. */
function deadLetterError(reason: string): UnrecoverableError {
  const err = new UnrecoverableError(reason);
  err.stack = `${err.name}: ${reason}`;
  return err;
}

/**
 * Thrown by a handler to dead-letter its job at once while still recording effects: a 404 was
 * fetched, so it counts as fetched as well as failed.
 */
export class GiveUpError extends NonRetryableError {
  constructor(
    code: string,
    message: string,
    readonly result: StageResult,
    context: Record<string, unknown> = {},
  ) {
    super(code, message, context);
  }
}

/**
 * Thrown by a handler whose job must wait (its host or proxy is not free yet). The job is parked
 * until then without holding a worker slot and without spending an attempt.
 */
export class DeferError extends Error {
  constructor(
    readonly waitMs: number,
    readonly reason: string,
  ) {
    super(`deferred ${waitMs} ms: ${reason}`);
  }
}

/** A started stage: its BullMQ worker, and how to stop it (in-flight jobs finish first). */
export interface RunningStage {
  stage: Stage;
  worker: Worker;
  close(): Promise<void>;
}

export function runningStage(stage: Stage, worker: Worker, cleanup: () => void | Promise<void> = () => undefined): RunningStage {
  return {
    stage,
    worker,
    async close() {
      await worker.close();
      await cleanup();
    },
  };
}

/** Parks a job taken again while its earlier run goes on in this process (oneRunPerJob), for half a lock. */
function parkWhileEarlierRuns(ctx: FleetContext, stage: Stage): (job: Job, token?: string) => Promise<never> {
  return async (job, token) => {
    const waitMs = Math.max(1000, ctx.env.lockDurationMs / 2);
    ctx.log.warn({ stage, jobId: job.id, url: job.data?.url, waitMs }, 'job taken again while its earlier run goes on here (its lock lapsed): parked');
    await job.moveToDelayed(Date.now() + waitMs, token);
    throw new DelayedError();
  };
}
