import type { Redis } from 'ioredis';
import type { JobsOptions } from 'bullmq';
import { STAGES, runScript, type JobByStage, type Keys, type Queues, type Stage } from '@crawlfleet/core';
import type { CounterIncrements } from './counters.js';
import type { CrawlState } from './registry.js';

/**
 * The life of a job, kept in the crawl's own keys so that completion is exact: a job id is added to
 * its stage's pending set before the job is enqueued, and leaves it only when its output is durably
 * enqueued or written (finishJob). The crawl is done when all three pending sets are empty.
 */
export type BeginResult = { state: CrawlState | 'unknown' | 'finished'; version: string };

export async function beginJob(redis: Redis, keys: Keys, crawlId: string, stage: Stage, id: string): Promise<BeginResult> {
  const k = keys.crawl(crawlId);
  const [state, version] = await runScript<[string, string]>(redis, 'beginJob', [k.meta, k.pending[stage], k.active[stage], k.delayed[stage]], [id]);
  return { state: state as BeginResult['state'], version };
}

export interface FinishInput {
  counters?: CounterIncrements;
  /** frontier update: fingerprint and its new state */
  url?: { fingerprint: string; state: string };
  dead?: DeadLetter;
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

/** Returns 'already' when the job had finished before (its effects are not applied twice). */
export async function finishJob(redis: Redis, keys: Keys, crawlId: string, stage: Stage, id: string, input: FinishInput = {}): Promise<'already' | 'finished' | 'crawl-done'> {
  const k = keys.crawl(crawlId);
  const counterArgs: (string | number)[] = [];
  for (const [name, n] of Object.entries(input.counters ?? {})) if (n) counterArgs.push(name, n);
  if (input.dead) counterArgs.push(`dead.${stage}`, 1);
  const result = await runScript<number>(
    redis,
    'finishJob',
    [k.meta, k.counters, k.urls, k.dead, k.active[stage], k.pending.fetch, k.pending.parse, k.pending.write, k.requests, k.rebuilds],
    [id, STAGES.indexOf(stage) + 1, new Date().toISOString(), input.url?.fingerprint ?? '', input.url?.state ?? '', input.dead ? JSON.stringify(input.dead) : '', ...counterArgs],
  );
  return result === 0 ? 'already' : result === 2 ? 'crawl-done' : 'finished';
}

/** The job leaves the active set for the delayed one (a retry, a deferral, or parked for a pause). */
export async function delayJob(redis: Redis, keys: Keys, crawlId: string, stage: Stage, id: string, counter: 'retries' | 'deferred' | '' = '', parked = false): Promise<boolean> {
  const k = keys.crawl(crawlId);
  return (await runScript<number>(redis, 'delayJob', [k.pending[stage], k.active[stage], k.delayed[stage], k.counters, k.parked[stage]], [id, counter, parked ? '1' : ''])) === 1;
}

export async function checkDone(redis: Redis, keys: Keys, crawlId: string): Promise<boolean> {
  const k = keys.crawl(crawlId);
  return (await runScript<number>(redis, 'checkDone', [k.meta, k.pending.fetch, k.pending.parse, k.pending.write], [new Date().toISOString()])) === 1;
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
 * URL has passed, or a dead-lettered one, is not enqueued again (addPending-4.lua). `alreadyPending` skips the first step for fetch jobs, which
 * admitUrls put in pending atomically with their admission.
 */
export async function enqueueJobs<S extends Stage>(redis: Redis, keys: Keys, queues: Queues, stage: S, crawlId: string, jobs: JobToEnqueue<S>[], alreadyPending = false): Promise<void> {
  if (jobs.length === 0) return;
  let toAdd = jobs;
  if (!alreadyPending) {
    const k = keys.crawl(crawlId);
    const pending = new Set(await runScript<string[]>(redis, 'addPending', [k.pending[stage], k.dead, k.urls, k.rebuilds], [STAGE_DONE_STATE[stage], ...jobs.map((j) => j.id)]));
    toAdd = jobs.filter((j) => pending.has(j.id));
    if (toAdd.length === 0) return;
  }
  await queues[stage].addBulk(toAdd.map((j) => ({ name: stage, data: j.data, opts: { ...j.opts, jobId: j.id } })));
}
