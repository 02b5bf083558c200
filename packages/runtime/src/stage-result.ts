import type { Job, JobsOptions } from 'bullmq';
import { NonRetryableError, jobId, type JobByStage, type LoadedSpiderModule, type Stage } from '@crawlfleet/core';
import type { CrawlRecord, FinishInput } from '@crawlfleet/crawl';
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

/**
 * Pure: the hand-over as it must be added: for the URL of the job handing it over. A URL's jobs keep
 * to the partition of the URL it was admitted under in every stage (the finish makes the next job
 * pending there), however the page's final URL differs (a redirect or a script in a browser that
 * landed on another host would otherwise send the next job to another partition, which drops it).
 */
export function inJobPartition(handOver: HandOver | undefined, url: string): HandOver | undefined {
  return handOver && handOver.data.url !== url ? { ...handOver, data: { ...handOver.data, url } } : handOver;
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
