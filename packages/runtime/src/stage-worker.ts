import { Worker, type Job, type Queue } from 'bullmq';
import { JOB_HISTORY, RetryableError, errorMessage, fingerprintOfJob, retryDelay, validateJob, type JobByStage, type Stage } from '@crawlfleet/core';
import { beginJob, classifyFinalFailure, type BeginResult, type CrawlRecord } from '@crawlfleet/crawl';
import { holdBackWaitMs, type CrawlBacklogs } from './backpressure.js';
import type { FleetContext } from './context.js';
import { HandlerDeadlineError, withDeadline } from './deadline.js';
import { DeadLetteredError, jobEnder, type EndJob, type JobAtHand } from './end-job.js';
import { endingOfBegin, endingOfError, endingOfResult } from './job-ending.js';
import { oneRunPerJob } from './one-run-per-job.js';
import { DeferError, type StageHandler, type StageResult } from './stage-result.js';

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

/** How long a job that began early waits in its worker for the hand-over, before it is parked instead (end-job.ts). */
const EARLY_WAITS_MS = [10, 40, 150];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs one stage on BullMQ. The harness owns the decisions every stage shares:
 * - a job that fails its schema is poison: dead-lettered with the reason, and the worker goes on;
 * - a job of a crawl that is gone, cancelled or finished is dropped; of a paused crawl, parked;
 * - a RetryableError is retried with backoff while attempts remain; anything else, or the last
 *   attempt, ends in the dead-letter set;
 * - the job is acknowledged only after finishJob recorded its effects (at-least-once, applied once).
 * Each run reads as its steps: check the job, begin it in its partition, run the handler, and end it
 * (end-job.ts, the one place a job ends, whichever way: job-ending.ts lists them).
 */
export function createStageWorker<S extends Stage>(ctx: FleetContext, options: StageWorkerOptions<S>): Worker {
  const { stage } = options;
  const end = jobEnder(ctx, stage, options.holdBack);
  const begin = beginner(ctx, stage);
  const run = handlerRunner(ctx, options);

  const processor = async (job: Job, token?: string): Promise<void> => {
    const checked = validateJob(stage, job.data);
    if (!checked.ok) return end({ job, token, url: String(job.data?.url ?? ''), data: job.data }, { kind: 'poison', reason: checked.reason });
    const data = checked.job;
    const started = await begin(data.crawlId, job.id!, data.url);
    const at: JobAtHand = { job, token, url: data.url, data, ...(started ? { crawl: started.crawl } : {}) };
    if (!started) return end(at, { kind: 'dropped', why: 'unknown' });
    const beforeRun = endingOfBegin(started.begun.state);
    if (beforeRun) return end(at, beforeRun);
    const attempts = job.opts.attempts ?? options.defaultAttempts ?? 1;
    try {
      // Recording the result is part of the run: a Redis error there is retried as the handler's would be.
      return await end(at, endingOfResult(await run(job, data, started.crawl, started.begun, attempts)));
    } catch (err) {
      return end(at, endingOfError(err, job.attemptsMade, attempts));
    }
  };

  const served = options.queue === 'render' ? ctx.queues.render : ctx.queues[stage];
  const takenAgain = async (job: Job, token?: string): Promise<never> => {
    const waitMs = Math.max(1000, ctx.env.lockDurationMs / 2);
    await end({ job, token, url: String(job.data?.url ?? ''), data: job.data }, { kind: 'taken-again', waitMs });
    throw new Error('unreachable: a job taken again is always parked');
  };
  const worker = new Worker(served.name, oneRunPerJob(processor, takenAgain), {
    connection: ctx.redis.duplicate(),
    prefix: options.queue === 'render' ? ctx.keys.renderQueuePrefix() : ctx.keys.queuePrefix(stage),
    concurrency: options.concurrency,
    lockDuration: ctx.env.lockDurationMs,
    stalledInterval: Math.max(1000, Math.floor(ctx.env.lockDurationMs / 2)),
    maxStalledCount: ctx.env.maxStalledCount ?? MAX_STALLED_COUNT[stage],
    ...JOB_HISTORY[stage],
    settings: {
      backoffStrategy: (attemptsMade: number, _type?: string, err?: Error) => retryDelay(attemptsMade, err instanceof RetryableError ? err.retryAfterMs : undefined),
    },
  });
  watchFinalFailures(ctx, stage, worker, served, end);
  return worker;
}

/** Runs a begun job's handler: held back first when its stage is, and bounded by its deadline. */
function handlerRunner<S extends Stage>(ctx: FleetContext, options: StageWorkerOptions<S>) {
  const { stage, handler, holdBack } = options;
  return async (job: Job, data: JobByStage[S], crawl: CrawlRecord, begun: BeginResult, attempts: number): Promise<StageResult> => {
    // Every start of a job counts in attemptsStarted; only failures count in attemptsMade.
    const deferrals = Math.max(0, (job.attemptsStarted ?? 1) - job.attemptsMade - 1);
    const backlog = holdBack ? await holdBack.over(crawl) : undefined;
    if (backlog !== undefined) {
      throw new DeferError(holdBackWaitMs(deferrals), `crawl ${data.crawlId} has ${backlog} ${holdBack!.downstream} jobs waiting (over ${holdBack!.highWater}): held back until they drain`);
    }
    const spiderModule = options.runsHooks && crawl.module ? await ctx.spiderModules.get(crawl.module) : undefined;
    // A handler that never returns would hold its slot for ever (BullMQ renews the lock): past its
    // deadline it is told to stop and the job fails, to be retried or dead-lettered like any failure.
    const deadlineMs = options.deadlineMs ? options.deadlineMs(crawl) : ctx.env.handlerDeadlineMs;
    const input = {
      job,
      data,
      crawl,
      fingerprint: fingerprintOfJob(job.id!),
      isLastAttempt: job.attemptsMade + 1 >= attempts,
      deferrals,
      incarnation: `${data.crawlId}@${begun.startedAt}`,
      ...(spiderModule ? { spiderModule } : {}),
    };
    return withDeadline(
      deadlineMs,
      (signal) => handler({ ...input, signal }),
      () => new HandlerDeadlineError(stage, deadlineMs, data.url),
    );
  };
}

/**
 * Begins a job in its URL's partition. The crawl's record comes from this process's cache; when the
 * partition's copy says the crawl changed (a new spider, or a reset and a new registration), the
 * record is read again, and the begin is repeated if the crawl's partitions moved.
 */
function beginner(ctx: FleetContext, stage: Stage) {
  const { redis, keys } = ctx;
  const beginWaitingForHandOver = async (crawl: CrawlRecord, id: string, url: string) => {
    let begun = await beginJob(redis, keys, crawl, stage, id, url);
    // The job before it is finishing: its finish, the next thing its worker does, hands this one over.
    for (const waitMs of EARLY_WAITS_MS) {
      if (begun.state !== 'early') break;
      await sleep(waitMs);
      begun = await beginJob(redis, keys, crawl, stage, id, url);
    }
    return begun;
  };
  return async (crawlId: string, id: string, url: string): Promise<{ crawl: CrawlRecord; begun: BeginResult } | undefined> => {
    let crawl = await ctx.crawls.get(crawlId);
    for (let tries = 0; crawl && tries < 2; tries++) {
      const begun = await beginWaitingForHandOver(crawl, id, url);
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
}

/**
 * BullMQ fails a job on its own when it stalled more than maxStalledCount times (its worker died
 * on it every time) or when it failed outside our handler's catch: our processor recorded no
 * dead letter, so the job would stay pending and the crawl would never end. Dead-letter it here;
 * for a job the handler dead-lettered already, finishJob is a no-op. The reconciler catches what
 * a process that dies now misses.
 */
function watchFinalFailures(ctx: FleetContext, stage: Stage, worker: Worker, served: Queue, end: EndJob): void {
  const { log } = ctx;
  const deadLetterFinalFailure = async (job: Job | undefined, failedReason: string) => {
    const crawlId = job?.data?.crawlId;
    if (!job?.id || typeof crawlId !== 'string' || !job.finishedOn) return;
    const crawl = await ctx.crawls.get(crawlId);
    if (!crawl) return;
    const { code, reason } = classifyFinalFailure(failedReason);
    await end({ job, url: job.data.url, data: job.data, crawl }, { kind: 'failed-by-bullmq', code, reason });
  };
  worker.on('error', (err) => log.error({ stage, err: { message: err.message } }, 'worker error'));
  worker.on('failed', (job, err) => {
    // Our own dead letters end as DeadLetteredError after finishJob recorded them: nothing to add.
    if (err instanceof DeadLetteredError) return;
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
