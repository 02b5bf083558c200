import { STAGES, type SinkSpec, type Stage } from '@crawlfleet/core';
import { countersFromHash } from './counters.js';
import type { CrawlState } from './registry.js';
import type { CrawlStatus, QueueCounts } from './crawl-status.js';

/**
 * What is left of a crawl once gc collected it: its meta, rewritten to the state, spider name,
 * dates, and these summary fields: `c.<counter>` for each counter that was not zero (the dead letters
 * per stage among them, as `c.dead.<stage>`) and `sink`, where its items went. Every value is short,
 * so Redis keeps the hash as a listpack: about 400 bytes, whatever the crawl's size.
 */
export type SummaryFields = Record<string, string>;

const COUNTER_FIELD = 'c.';

/** Pure: a sink as a person reads it; the stored spec has no credentials. */
export function describeSink(spec: SinkSpec): string {
  if (spec.kind !== 'mongo') return `${spec.kind} ${spec.path}`;
  return spec.url ? `mongo ${spec.url}` : "mongo (the writers' MONGO_URL)";
}

/** Pure: the summary fields of a crawl from its status and its stored sink (JSON, without credentials). */
export function summaryFields(status: Pick<CrawlStatus, 'counters' | 'queues'>, sinkJson: string | null): SummaryFields {
  const fields: SummaryFields = {};
  for (const [name, value] of Object.entries(status.counters)) if (value !== 0) fields[`${COUNTER_FIELD}${name}`] = String(value);
  for (const stage of STAGES) if (status.queues[stage].failed !== 0) fields[`${COUNTER_FIELD}dead.${stage}`] = String(status.queues[stage].failed);
  fields.sink = sinkJson ? describeSink(JSON.parse(sinkJson) as SinkSpec) : 'unknown';
  return fields;
}

/** Pure: the status object of a collected crawl from its meta: its final counters; no queues, hosts or partitions left. */
export function collectedStatus(crawlId: string, meta: Record<string, string>): CrawlStatus & { collected: NonNullable<CrawlStatus['collected']> } {
  const counters: Record<string, string> = {};
  for (const [field, value] of Object.entries(meta)) if (field.startsWith(COUNTER_FIELD)) counters[field.slice(COUNTER_FIELD.length)] = value;
  const dead = (stage: Stage) => Number(counters[`dead.${stage}`] ?? 0);
  return {
    crawlId,
    spider: meta.spiderName ?? '',
    state: meta.state as CrawlState,
    counters: countersFromHash(counters),
    queues: Object.fromEntries(STAGES.map((s) => [s, { waiting: 0, active: 0, delayed: 0, failed: dead(s) }])) as Record<Stage, QueueCounts>,
    frontier: 0,
    hosts: [],
    partitions: 0,
    startedAt: meta.startedAt ?? '',
    finishedAt: meta.finishedAt || null,
    collected: { at: meta.collectedAt ?? '', sink: meta.sink ?? 'unknown', items: Number(counters.written ?? 0) },
  };
}
