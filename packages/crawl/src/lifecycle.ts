import type { JobsOptions } from 'bullmq';
import { STAGES, runScript, type JobByStage, type Keys, type Queues, type Stage, type RedisClient } from '@crawlfleet/core';
import { takenRequests, type FrontierTake, type TakenRequest } from '@crawlfleet/frontier';
import type { CounterIncrements } from './counters.js';
import type { CrawlState } from './registry.js';

/**
 * The life of a job, kept in the crawl's own keys so that completion is exact: a job id is added to
 * its stage's pending set before the job is enqueued, and leaves it only when its output is durably
 * enqueued or written (finishJob). The crawl is done when all three pending sets are empty.
 */
export type BeginResult = { state: CrawlState | 'unknown' | 'finished'; version: string; startedAt: string };

export async function beginJob(redis: RedisClient, keys: Keys, crawlId: string, stage: Stage, id: string): Promise<BeginResult> {
  const k = keys.crawl(crawlId);
  const [state, version, startedAt] = await runScript<[string, string, string]>(redis, 'beginJob', [k.meta, k.pending[stage], k.active[stage], k.delayed[stage]], [id]);
  return { state: state as BeginResult['state'], version, startedAt: startedAt ?? '' };
}

export interface FinishInput {
  counters?: CounterIncrements;
  /** frontier update: fingerprint and its new state */
  url?: { fingerprint: string; state: string };
  dead?: DeadLetter;
  /** a fetch job's finish makes room in the crawl's window: take URLs from the frontier into it */
  take?: FrontierTake;
  /** the next stage's job this one enqueued for its URL (finishJob-11.lua, ARGV[9]) */
  handedOver?: string;
}

export interface DeadLetter {
  url: string;
  stage: Stage;
  reason: string;
  code: string;
  attempts: number;
  at: string;
  /** the job payload, so the URL can be replayed (page bodies are left out) */
  data?: unknown;
}

/**
 * Pure: what a dead letter keeps of its job's payload: enough to replay it. A parse job's body is
 * left out (it is large, and replay fetches the page again), and so are its response headers (a
 * site's Set-Cookie has no business in a record that `dead-letters --json` prints).
 */
export function deadLetterData(stage: Stage, data: unknown): unknown {
  if (stage !== 'parse' || typeof data !== 'object' || data === null) return data;
  return { ...data, body: undefined, headers: undefined };
}

export type FinishOutcome = 'already' | 'finished' | 'crawl-done';

/** Returns 'already' when the job had finished before (its effects are not applied twice). */
export async function finishJob(redis: RedisClient, keys: Keys, crawlId: string, stage: Stage, id: string, input: FinishInput = {}): Promise<FinishOutcome> {
  return (await finishJobTaking(redis, keys, crawlId, stage, id, input)).outcome;
}

/**
 * finishJob, and the fetch requests its finish took from the frontier (input.take): their ids are
 * pending, and the caller adds their jobs (enqueueFetches).
 */
export async function finishJobTaking(redis: RedisClient, keys: Keys, crawlId: string, stage: Stage, id: string, input: FinishInput = {}): Promise<{ outcome: FinishOutcome; taken: TakenRequest[] }> {
  const k = keys.crawl(crawlId);
  const counterArgs: (string | number)[] = [];
  for (const [name, n] of Object.entries(input.counters ?? {})) if (n) counterArgs.push(name, n);
  if (input.dead) counterArgs.push(`dead.${stage}`, 1);
  const [result, taken] = await runScript<[number, string[]]>(
    redis,
    'finishJob',
    [k.meta, k.counters, k.urls, k.dead, k.active[stage], k.pending.fetch, k.pending.parse, k.pending.write, k.requests, k.rebuilds, k.frontier],
    [
      id,
      STAGES.indexOf(stage) + 1,
      new Date().toISOString(),
      input.url?.fingerprint ?? '',
      input.url?.state ?? '',
      input.dead ? JSON.stringify(input.dead) : '',
      input.take?.window ?? 0,
      input.take?.minBatch ?? 0,
      input.handedOver ?? '',
      ...counterArgs,
    ],
  );
  const outcome: FinishOutcome = result === 0 ? 'already' : result === 2 ? 'crawl-done' : 'finished';
  return { outcome, taken: takenRequests(taken) };
}

/** The job leaves the active set for the delayed one (a retry, a deferral, or parked for a pause). */
export async function delayJob(redis: RedisClient, keys: Keys, crawlId: string, stage: Stage, id: string, counter: 'retries' | 'deferred' | '' = '', parked = false): Promise<boolean> {
  const k = keys.crawl(crawlId);
  return (await runScript<number>(redis, 'delayJob', [k.pending[stage], k.active[stage], k.delayed[stage], k.counters, k.parked[stage]], [id, counter, parked ? '1' : ''])) === 1;
}

export async function checkDone(redis: RedisClient, keys: Keys, crawlId: string): Promise<boolean> {
  const k = keys.crawl(crawlId);
  return (await runScript<number>(redis, 'checkDone', [k.meta, k.pending.fetch, k.pending.parse, k.pending.write, k.frontier], [new Date().toISOString()])) === 1;
}

export interface JobToEnqueue<S extends Stage> {
  id: string;
  data: JobByStage[S];
  opts?: JobsOptions;
}

/**
 * A URL's state in the frontier once a stage has finished it: the stage's durable done marker. A job
 * of a stage the URL has passed is not enqueued again (addPending-4.lua).
 */
export const STAGE_DONE_STATE: Record<Stage, 'd' | 'p' | 'w'> = { fetch: 'd', parse: 'p', write: 'w' };

/**
 * Enqueues jobs of one crawl: pending first, then the queue, so completion never misses a job.
 * Deterministic job ids make a repeated enqueue a no-op while the job exists; a job whose stage the
 * URL has passed, or a dead-lettered one, is not enqueued again (addPending-4.lua). Fetch jobs come
 * from the frontier instead (admitAndEnqueue, enqueueFetches).
 */
export async function enqueueJobs<S extends Stage>(redis: RedisClient, keys: Keys, queues: Queues, stage: S, crawlId: string, jobs: JobToEnqueue<S>[]): Promise<void> {
  if (jobs.length === 0) return;
  const k = keys.crawl(crawlId);
  const pending = new Set(await runScript<string[]>(redis, 'addPending', [k.pending[stage], k.dead, k.urls, k.rebuilds], [STAGE_DONE_STATE[stage], ...jobs.map((j) => j.id)]));
  const toAdd = jobs.filter((j) => pending.has(j.id));
  if (toAdd.length === 0) return;
  await queues[stage].addBulk(toAdd.map((j) => ({ name: stage, data: j.data, opts: { ...j.opts, jobId: j.id } })));
}
