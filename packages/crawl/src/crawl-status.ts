import type { Stage } from '@crawlfleet/core';
import type { Counters } from './counters.js';
import type { CrawlState } from './registry.js';

/** The status of a crawl as `status` reports it (CONTRACT.md), and the parts it is made of. */

export interface QueueCounts {
  waiting: number;
  active: number;
  delayed: number;
  failed: number;
}

/** A host of the crawl with URLs waiting (an extension of the contract). */
export interface HostBacklog {
  host: string;
  /** its URLs admitted and waiting in its queue */
  waiting: number;
  /** its URLs in the fetch stage now */
  inFlight: number;
  /** its concurrency and the delay between its starts (ms), as the frontier schedules it */
  concurrency: number;
  delayMs: number;
  /** how long until the frontier hands out its next URL (ms; 0: now); null while it is at its concurrency */
  nextTurnInMs: number | null;
}

export interface CrawlStatus {
  crawlId: string;
  spider: string;
  state: CrawlState;
  counters: Counters;
  /**
   * this crawl's jobs in each queue; `failed` counts its dead letters from that stage. The fetch
   * stage's `waiting` includes the URLs still waiting in the frontier's host queues.
   */
  queues: Record<Stage, QueueCounts>;
  /** URLs admitted and waiting in the frontier's host queues, not yet fetch jobs (an extension of the contract) */
  frontier: number;
  /** the hosts with the most URLs waiting, busiest first, at most STATUS_HOSTS (an extension of the contract) */
  hosts: HostBacklog[];
  /** the partitions (hash slots) the crawl's frontier is spread over (an extension of the contract) */
  partitions: number;
  /** a code spider's module: its path and the hash of its source (an extension of the contract) */
  spiderModule?: { path: string; hash: string };
  /** a sample of why items were counted invalid, most frequent first (an extension of the contract) */
  invalidReasons?: Array<{ reason: string; count: number }>;
  startedAt: string;
  finishedAt: string | null;
  /**
   * present once gc collected the crawl (an extension of the contract): only its summary is left in
   * Redis, so its counters are final and its queues, frontier and hosts empty
   */
  collected?: CollectedMark;
}

/** How status marks a collected crawl (an extension of the contract's status object). */
export interface CollectedMark {
  /** when gc collected it */
  at: string;
  /** where its items went, described without credentials: `jsonl /data/books/items.jsonl`, `mongo mongodb://host/db` */
  sink: string;
  /** items durably stored in the sink (the `written` counter) */
  items: number;
}
