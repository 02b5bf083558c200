import type { JobsOptions } from 'bullmq';
import { STAGES, runScript, type JobByStage, type Keys, type PartKeys, type Stage, type RedisClient } from '@crawlfleet/core';
import { hostOfUrl, takenRequests, type FrontierTake, type TakenRequest } from '@crawlfleet/frontier';
import { settleCrawl } from './completion.js';
import type { CounterIncrements } from './counters.js';
import { partKeysOfUrl, type CrawlLayout } from './layout.js';
import type { CrawlState } from './registry.js';

/**
 * The life of a job, kept in its URL's partition so that completion is exact: a job id is pending
 * in its stage from the step that hands it its URL (a take from the frontier, the finish of the job
 * before it) until its own finish, which applies its effects once (finishJob). The crawl is done
 * when every partition has nothing pending and nothing waiting (completion.ts).
 */
export type BeginResult = { state: CrawlState | 'unknown' | 'finished' | 'early'; version: string; startedAt: string };

/** The job that hands a job its URL: a parse job's fetch job, a write job's parse job. */
const PARENT: Record<Stage, Stage | undefined> = { fetch: undefined, parse: 'fetch', write: 'parse' };

export async function beginJob(redis: RedisClient, keys: Keys, layout: CrawlLayout, stage: Stage, id: string, url: string): Promise<BeginResult> {
  const k = partKeysOfUrl(keys, layout, url);
  const parent = PARENT[stage];
  const [state, version, startedAt] = await runScript<[string, string, string]>(
    redis,
    'beginJob',
    [k.part, k.pending[stage], k.active[stage], k.delayed[stage], k.pending[parent ?? stage]],
    [id, parent ? `${STAGE_LETTER[parent]}${id.slice(1)}` : ''],
  );
  return { state: state as BeginResult['state'], version: version ?? '', startedAt: startedAt ?? '' };
}

const STAGE_LETTER: Record<Stage, string> = { fetch: 'f', parse: 'p', write: 'w' };

/** What a fetch learnt of its host, for the frontier's schedule of the host's next turns. */
export interface HostReport {
  concurrency?: number;
  /** the delay between starts the limiter applied (ms): the spider's, Crawl-delay, AutoThrottle */
  delayMs?: number;
  /** when the request started, on the limiter's clock (Redis's, ms) */
  startedAt?: number;
  /** a Retry-After hold: no request before this (ms, epoch) */
  holdUntil?: number;
}

export interface FinishInput {
  counters?: CounterIncrements;
  /** frontier update: fingerprint and its new state */
  url?: { fingerprint: string; state: string };
  dead?: DeadLetter;
  /** a fetch job's finish gives its host's turn back and feeds the fetch stage: how much to take */
  take?: FrontierTake;
  /** the next stage's job this one hands its URL to (finishJob-12.lua, ARGV[10]): pending from this finish, added after it */
  handedOver?: string;
  /** a fetch job's report on its host */
  host?: HostReport;
  /**
   * The WARC target URI whose exchange this job archived (the final URL of its redirects): the
   * `archived` counter counts it once per run of the crawl, as the WARC sink archives it once.
   */
  archivedUri?: string;
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
 * site's Set-Cookie has no business in a record that `dead-letters --json` prints) and any WARC
 * capture (a replayed write archives nothing; its URL keeps the answer archived first).
 */
export function deadLetterData(stage: Stage, data: unknown): unknown {
  if (typeof data !== 'object' || data === null) return data;
  // A WARC capture (the page as on the wire, its Set-Cookie and request headers) stays out too.
  if (stage !== 'parse') return 'capture' in data ? { ...data, capture: undefined } : data;
  return { ...data, body: undefined, headers: undefined, capture: undefined };
}

export type FinishOutcome = 'already' | 'finished' | 'crawl-done';

/**
 * Returns 'already' when the job had finished before (its effects are not applied twice), or when it
 * belongs to a run of the crawl that a reset ended (layout.startedAt): it changes nothing.
 */
export async function finishJob(redis: RedisClient, keys: Keys, layout: CrawlLayout, stage: Stage, id: string, url: string, input: FinishInput = {}): Promise<FinishOutcome> {
  return (await finishJobTaking(redis, keys, layout, stage, id, url, input)).outcome;
}

const opt = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '' : Math.round(n));

/**
 * finishJob, and the fetch requests its finish took from the frontier (input.take): their ids are
 * pending, and the caller adds their jobs (enqueueFetches). When the finish left its partition idle,
 * the crawl is checked for completion.
 */
export async function finishJobTaking(
  redis: RedisClient,
  keys: Keys,
  layout: CrawlLayout,
  stage: Stage,
  id: string,
  url: string,
  input: FinishInput = {},
): Promise<{ outcome: FinishOutcome; taken: TakenRequest[] }> {
  return finishInPartition(redis, keys, layout, partKeysOfUrl(keys, layout, url), stage, id, stage === 'fetch' ? hostOfUrl(url) : '', input);
}

/**
 * finishJob in a partition given by its keys: for a job whose URL is lost (the reconciler's), the
 * partition its id is pending in. `host`: a fetch job's URL's host, whose turn goes back ('' for none).
 */
export async function finishInPartition(
  redis: RedisClient,
  keys: Keys,
  layout: CrawlLayout,
  k: PartKeys,
  stage: Stage,
  id: string,
  host: string,
  input: FinishInput = {},
): Promise<{ outcome: FinishOutcome; taken: TakenRequest[] }> {
  const counterArgs: (string | number)[] = [];
  for (const [name, n] of Object.entries(input.counters ?? {})) if (n) counterArgs.push(name, n);
  if (input.dead) counterArgs.push(`dead.${stage}`, 1);
  const report = input.host;
  const [result, taken, idle] = await runScript<[number, string[], number]>(
    redis,
    'finishJob',
    [k.part, k.counters, k.dead, k.active[stage], k.pending.fetch, k.pending.parse, k.pending.write, k.requests, k.rebuilds, k.hosts, k.ready, k.backlog],
    [
      id,
      STAGES.indexOf(stage) + 1,
      new Date().toISOString(),
      input.url?.fingerprint ?? '',
      input.url?.state ?? '',
      input.dead ? JSON.stringify(input.dead) : '',
      input.take?.window ?? 0,
      input.take?.minBatch ?? 0,
      input.take?.horizonMs ?? 0,
      input.handedOver ?? '',
      k.urlBucket,
      k.hostQueue,
      host,
      opt(report?.concurrency),
      opt(report?.delayMs),
      opt(report?.startedAt),
      opt(report?.holdUntil),
      layout.crawlId,
      layout.startedAt ?? '',
      input.archivedUri ?? '',
      ...counterArgs,
    ],
  );
  let outcome: FinishOutcome = result === 0 ? 'already' : 'finished';
  if (idle === 1 && (await settleCrawl(redis, keys, layout))) outcome = 'crawl-done';
  return { outcome, taken: takenRequests(taken) };
}

/** The job leaves the active set for the delayed one (a retry, a deferral, or parked for a pause). */
export async function delayJob(
  redis: RedisClient,
  keys: Keys,
  layout: CrawlLayout,
  stage: Stage,
  id: string,
  url: string,
  counter: 'retries' | 'deferred' | '' = '',
  parked = false,
): Promise<boolean> {
  const k = partKeysOfUrl(keys, layout, url);
  return (
    (await runScript<number>(
      redis,
      'delayJob',
      [k.pending[stage], k.active[stage], k.delayed[stage], k.counters, k.parked[stage], k.part],
      [id, counter, parked ? '1' : '', layout.startedAt ?? ''],
    )) === 1
  );
}

/** Marks the crawl done if nothing of it is pending or waiting (after a resume, or a seed that admitted nothing new). */
export async function checkDone(redis: RedisClient, keys: Keys, layout: CrawlLayout): Promise<boolean> {
  return settleCrawl(redis, keys, layout);
}

export interface JobToEnqueue<S extends Stage> {
  id: string;
  data: JobByStage[S];
  opts?: JobsOptions;
}

/**
 * A URL's state in the frontier once a stage has finished it: the stage's durable done marker. A job
 * of a stage the URL has passed is never marked pending again (finishJob-12.lua's hand-over).
 */
export const STAGE_DONE_STATE: Record<Stage, 'd' | 'p' | 'w'> = { fetch: 'd', parse: 'p', write: 'w' };

export type { PartKeys };
