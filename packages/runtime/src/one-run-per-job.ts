import type { Job } from 'bullmq';

export type Processor = (job: Job, token?: string) => Promise<void>;

/**
 * One run of a job at a time in this process. A job whose lock lapsed while its run went on (a
 * stalled event loop, a slow Redis) is moved back to wait by BullMQ's stalled check, and this same
 * worker may take it again while the first run still works: two browsers on one page, two requests
 * to one host. The second taking is handed to `takenAgain`, which parks the job (it must end the
 * run: move the job and throw DelayedError) rather than wait here: BullMQ forgets the second run's
 * lock when the first settles, so a waiting run would go on without renewal. The job's next run
 * begins after the first has ended, and finds the job finished, or finishes what it could not.
 * Across processes, the crawl's begin and finish scripts keep the effects to one.
 */
export function oneRunPerJob(processor: Processor, takenAgain: (job: Job, token?: string) => Promise<never>): Processor {
  const running = new Set<string>();
  return async (job, token) => {
    const id = job.id!;
    if (running.has(id)) return takenAgain(job, token);
    running.add(id);
    try {
      await processor(job, token);
    } finally {
      running.delete(id);
    }
  };
}
