import type { Queue, Worker } from 'bullmq';
import type { Logger } from '@crawlfleet/core';

/**
 * The job states that count against a queue's high-water mark: every job that is in Redis and still
 * to be run. Delayed jobs count as much as waiting ones: a write job parked while its store is
 * unavailable (or a parse job waiting for its retry) holds its items or its page body in Redis just
 * the same, and during a long MongoDB outage nearly every write job is delayed. Active jobs are
 * bounded by the workers' concurrency, so they are left out.
 */
export const BACKPRESSURE_STATES = ['waiting', 'delayed', 'prioritized'] as const;

/** Pure: the backlog of a queue from its job counts by state. */
export function backlogDepth(counts: Partial<Record<string, number>>): number {
  return BACKPRESSURE_STATES.reduce((n, state) => n + (counts[state] ?? 0), 0);
}

/**
 * Pure: what a stage does about a downstream backlog of `depth` jobs. Over the high-water mark it
 * pauses; once the backlog has drained to half of it, it resumes (the gap keeps it from flapping).
 */
export function backpressureAction(paused: boolean, depth: number, highWater: number): 'pause' | 'resume' | 'none' {
  if (!paused && depth > highWater) return 'pause';
  if (paused && depth <= highWater / 2) return 'resume';
  return 'none';
}

/**
 * Bounded memory: a stage stops taking work while the queue after it holds more than `highWater`
 * jobs waiting or delayed (BACKPRESSURE_STATES), and takes work again once it has drained to half of that.
 * A fetcher watches the parse queue (PARSE_HIGH_WATER), a parser the write queue (WRITE_HIGH_WATER).
 * `parked`: delayed jobs that do not count, those of paused crawls (parked until their resume), so a
 * paused crawl does not hold back every other crawl's intake.
 */
export function watchBackpressure(worker: Worker, downstream: Queue, highWater: number, log: Logger, intervalMs = 500, parked: () => Promise<number> = async () => 0): () => void {
  let paused = false;
  let busy = false;
  const timer = setInterval(async () => {
    if (busy) return;
    busy = true;
    try {
      const counts = await downstream.getJobCounts(...BACKPRESSURE_STATES);
      // Parked jobs can only lower the depth, so they are read only when it could change the decision.
      const backlog = backlogDepth(counts);
      const depth = backlog > highWater / 2 ? Math.max(0, backlog - (await parked())) : backlog;
      const action = backpressureAction(paused, depth, highWater);
      if (action === 'pause') {
        paused = true;
        log.info({ queue: downstream.name, depth, waiting: counts.waiting, delayed: counts.delayed, highWater }, 'downstream queue over its high-water mark: pausing intake');
        await worker.pause(true);
      } else if (action === 'resume') {
        paused = false;
        log.info({ queue: downstream.name, depth }, 'downstream queue drained: resuming intake');
        worker.resume();
      }
    } catch {
      // Redis is unreachable; the workers' own reconnects report it.
    } finally {
      busy = false;
    }
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
