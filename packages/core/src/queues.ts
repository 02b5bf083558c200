import { Queue, type ConnectionOptions, type KeepJobs } from 'bullmq';
import { STAGES, type Keys, type Stage } from './keys.js';

export type Queues = Record<Stage, Queue>;

const DAY_SECONDS = 86_400;

/**
 * The jobs BullMQ keeps once they end, for Bull Board. Completed jobs go at once: the frontier, not
 * BullMQ, remembers URLs, and a kept job would turn a later add of its id into a silent no-op.
 * Dead-lettered jobs stay in the failed set with their reason, bounded by count and age; a failed
 * parse job carries its page body, so few of those are kept.
 */
export const JOB_HISTORY: Record<Stage, { removeOnComplete: KeepJobs; removeOnFail: KeepJobs }> = {
  fetch: { removeOnComplete: { count: 0 }, removeOnFail: { count: 5000, age: 7 * DAY_SECONDS } },
  parse: { removeOnComplete: { count: 0 }, removeOnFail: { count: 100, age: DAY_SECONDS } },
  write: { removeOnComplete: { count: 0 }, removeOnFail: { count: 5000, age: 7 * DAY_SECONDS } },
};

/** The three stage queues. */
export function createQueues(connection: ConnectionOptions, keys: Keys): Queues {
  return Object.fromEntries(
    STAGES.map((stage) => [
      stage,
      new Queue(stage, {
        connection,
        prefix: keys.queuePrefix(stage),
        defaultJobOptions: JOB_HISTORY[stage],
      }),
    ]),
  ) as Queues;
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.all(Object.values(queues).map((q) => q.close()));
}
