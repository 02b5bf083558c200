import { DelayedError, UnrecoverableError } from 'bullmq';
import { NonRetryableError, SpiderVersionPending, StaleRunError, errorMessage } from '@crawlfleet/core';
import type { BeginResult } from '@crawlfleet/crawl';
import { DeferError, GiveUpError, type StageResult } from './stage-result.js';

/**
 * Every way a stage's job ends, as a value. The processor decides which (the pure functions below),
 * and `jobEnder`'s `end` (end-job.ts) is the one place that runs what each takes: a new way to end is a new
 * case here and there, not a new path through the worker. docs/architecture.md has them as the job
 * life cycle's state table.
 */
export type JobEnding =
  /** the handler's result: the stage's done marker, its effects, the next stage's job */
  | { kind: 'done'; result: StageResult }
  /** the handler asks for a browser: the same id goes on in the render queue, still pending here */
  | { kind: 'rerouted' }
  /** taken before the job handing it over finished: it comes back shortly */
  | { kind: 'early' }
  /** its crawl is paused: parked until a resume */
  | { kind: 'parked' }
  /** it must wait (held back, its host or proxy not free, its spider's code not deployed): no attempt spent */
  | { kind: 'deferred'; waitMs: number }
  /** a retryable failure with attempts left: BullMQ's backoff */
  | { kind: 'retried'; error: unknown }
  /** given up: finished with a dead letter, and a give-up's effects */
  | { kind: 'dead'; code: string; reason: string; result: StageResult }
  /** it fails the job schema: dead-lettered with the reason, in its crawl when that is known */
  | { kind: 'poison'; reason: string }
  /** its crawl was cancelled or failed: finished, nothing counted */
  | { kind: 'abandoned' }
  /**
   * nothing to run or record: its crawl is unknown, the job finished already, its crawl is done (a
   * job still pending there lost its finish to a failover: the reconciler runs the crawl again for
   * it), or the crawl was reset under it (stale: its run is over)
   */
  | { kind: 'dropped'; why: 'unknown' | 'finished' | 'done' | 'stale'; message?: string }
  /** the handler moved the job itself and threw DelayedError */
  | { kind: 'moved'; error: DelayedError }
  /** taken again in this process while its earlier run goes on (its lock lapsed): parked a while */
  | { kind: 'taken-again'; waitMs: number }
  /** BullMQ failed it on its own (it stalled too often, or failed outside the processor) */
  | { kind: 'failed-by-bullmq'; code: string; reason: string };

/** Pure: how a job ends before its handler runs, from its begin; undefined when it runs. */
export function endingOfBegin(state: BeginResult['state']): JobEnding | undefined {
  switch (state) {
    case 'running':
      return undefined;
    case 'early':
      return { kind: 'early' };
    case 'paused':
      return { kind: 'parked' };
    case 'unknown':
    case 'finished':
    case 'done':
      return { kind: 'dropped', why: state };
    default:
      return { kind: 'abandoned' };
  }
}

/** Pure: how a job ends when its handler returned. */
export function endingOfResult(result: StageResult): JobEnding {
  return result.reroute ? { kind: 'rerouted' } : { kind: 'done', result };
}

/**
 * Pure: how a job ends when its run threw (the handler, or the recording of its result).
 * `attemptsMade`: BullMQ's failures of the job before this run; `attempts`: how many it may have.
 */
export function endingOfError(err: unknown, attemptsMade: number, attempts: number): JobEnding {
  if (err instanceof DelayedError) return { kind: 'moved', error: err };
  if (err instanceof StaleRunError) return { kind: 'dropped', why: 'stale', message: err.message };
  if (err instanceof DeferError || err instanceof SpiderVersionPending) return { kind: 'deferred', waitMs: err.waitMs };
  // BullMQ retries no UnrecoverableError: one is dead-lettered at once, as BullMQ will fail it.
  const retryable = !(err instanceof NonRetryableError) && !(err instanceof UnrecoverableError);
  if (retryable && attemptsMade + 1 < attempts) return { kind: 'retried', error: err };
  const code = (err as { code?: string }).code ?? 'ERR_UNEXPECTED';
  return { kind: 'dead', code, reason: errorMessage(err), result: err instanceof GiveUpError ? err.result : {} };
}
