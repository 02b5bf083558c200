import { Queue, type ConnectionOptions } from 'bullmq';
import { STAGES, type Keys, type Stage } from './keys.js';

export type Queues = Record<Stage, Queue>;

/** The three stage queues. Completed jobs are removed at once: the frontier, not BullMQ, remembers URLs. */
export function createQueues(connection: ConnectionOptions, keys: Keys): Queues {
  return Object.fromEntries(
    STAGES.map((stage) => [
      stage,
      new Queue(stage, {
        connection,
        prefix: keys.queuePrefix(stage),
        defaultJobOptions: { removeOnComplete: true, removeOnFail: { count: 10_000 } },
      }),
    ]),
  ) as Queues;
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.all(Object.values(queues).map((q) => q.close()));
}
