import type { Queue, Worker } from 'bullmq';
import type { Logger } from '@crawlfleet/core';

/**
 * Bounded memory: a stage stops taking work while the queue after it holds more than `highWater`
 * jobs, and takes work again once it has drained below half of that.
 */
export function watchBackpressure(worker: Worker, downstream: Queue, highWater: number, log: Logger, intervalMs = 500): () => void {
  let paused = false;
  let busy = false;
  const timer = setInterval(async () => {
    if (busy) return;
    busy = true;
    try {
      const depth = await downstream.getWaitingCount();
      if (!paused && depth > highWater) {
        paused = true;
        log.info({ queue: downstream.name, depth, highWater }, 'downstream queue over its high-water mark: pausing intake');
        await worker.pause(true);
      } else if (paused && depth <= highWater / 2) {
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
