import { Queue, type ConnectionOptions, type KeepJobs } from 'bullmq';
import { STAGES, type Keys, type Stage } from './keys.js';

export type Queues = Record<Stage, Queue>;

const DAY_SECONDS = 86_400;

/**
 * The jobs BullMQ keeps once they end, for Bull Board, bounded by count and age. A kept job turns a
 * later add of its id into a silent no-op, so only what is never added again is kept: dead-lettered
 * jobs, in the failed set with their reason (a dead-lettered job is never marked pending again); a
 * failed parse job carries its page body, so few of those are kept. Completed jobs go at once: a
 * fetch or parse job that runs again after a crash adds its next stage's job again, and must not
 * find its id taken; and keeping them cost Redis a trim of the completed set at every completion.
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
