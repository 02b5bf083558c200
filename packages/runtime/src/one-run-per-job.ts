import type { Job } from 'bullmq';

export type Processor = (job: Job, token?: string) => Promise<void>;

/**
 * One run of a job at a time in this process. A job whose lock lapsed while its run went on (a
 * stalled event loop, a slow Redis) is moved back to wait by BullMQ's stalled check, and this same
 * worker may take it again while the first run still works: two browsers on one page, two requests
 * to one host. The second run waits for the first; its begin then finds the job finished, or
 * finishes what the first could not. Across processes, the crawl's begin and finish scripts keep
 * the effects to one.
 */
export function oneRunPerJob(processor: Processor, onWait: (job: Job) => void): Processor {
  const running = new Map<string, Promise<void>>();
  return async (job, token) => {
    const id = job.id!;
    const earlier = running.get(id);
    if (earlier) onWait(job);
    const run = (earlier ? earlier.catch(() => undefined) : Promise.resolve()).then(() => processor(job, token));
    running.set(id, run);
    try {
      await run;
    } finally {
      if (running.get(id) === run) running.delete(id);
    }
  };
}
