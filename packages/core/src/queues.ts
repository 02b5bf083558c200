import { Queue, type ConnectionOptions, type Job, type KeepJobs } from 'bullmq';
import { STAGES, type Keys, type Stage } from './keys.js';

/**
 * The stage queues, and `render`: the fetch stage's jobs that a browser runs (the renderers'). A
 * fetch-stage job id lives in one of `fetch` and `render` at a time; fetchStageQueues names both.
 */
export type Queues = Record<Stage, Queue> & { render: Queue };

/** The BullMQ queues a stage's jobs live in: fetch-stage jobs are in `fetch` or `render`. */
export function stageQueues(queues: Queues, stage: Stage): Queue[] {
  return stage === 'fetch' ? [queues.fetch, queues.render] : [queues[stage]];
}

/** A stage's job by id, in whichever of its queues holds it. */
export async function getStageJob(queues: Queues, stage: Stage, id: string): Promise<Job | undefined> {
  for (const queue of stageQueues(queues, stage)) {
    const job = await queue.getJob(id);
    if (job) return job;
  }
  return undefined;
}

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

/** The three stage queues, and the render queue. */
export function createQueues(connection: ConnectionOptions, keys: Keys): Queues {
  const stages = Object.fromEntries(
    STAGES.map((stage) => [
      stage,
      new Queue(stage, {
        connection,
        prefix: keys.queuePrefix(stage),
        defaultJobOptions: JOB_HISTORY[stage],
      }),
    ]),
  ) as Record<Stage, Queue>;
  return { ...stages, render: new Queue(RENDER_QUEUE, { connection, prefix: keys.renderQueuePrefix(), defaultJobOptions: JOB_HISTORY.fetch }) };
}

/** The render queue's name (its jobs are the fetch stage's). */
export const RENDER_QUEUE = 'render';

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.all(Object.values(queues).map((q) => q.close()));
}
