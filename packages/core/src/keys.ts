import { ConfigError } from './errors.js';
import { fnv1a, spreadTag, stageTag } from './partitions.js';

/**
 * Every Redis key crawlfleet uses is built here; no other file spells a key.
 *
 * Hash tags keep the fleet Redis Cluster ready:
 * - each queue lives in its own slot, in its own third of the slot space: BullMQ prefix `<P>:{fetch}`,
 *   so its keys are `<P>:{fetch}:fetch:*` (and `{parse}`, `{write/0}`);
 * - all keys of one crawl share the slot `{<crawlId>}`, so every Lua script over them is single-slot;
 * - a host's politeness keys share the slot `{polite:<n>}` (n by the host's hash), the proxies' `{polite}`;
 * - the crawl index `<P>:crawls` is touched only by plain commands, never inside a script.
 */
export const STAGES = ['fetch', 'parse', 'write'] as const;
export type Stage = (typeof STAGES)[number];

export const CRAWL_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export function assertCrawlId(id: string): string {
  if (!CRAWL_ID_PATTERN.test(id)) {
    throw new ConfigError(`--crawl-id ${JSON.stringify(id)}: letters, digits, "_", "." and "-" only, at most 128, starting with a letter or digit`);
  }
  return id;
}

/** A crawl's keys in its own slot `{crawlId}`: what is the crawl's as a whole. */
export interface CrawlKeys {
  /**
   * hash: spider JSON, state, sink, timestamps, `parts` (its partition count), `gen` (see injections);
   * once gc collected the crawl, only its summary: state, spiderName, startedAt, finishedAt,
   * `collectedAt`, `c.<counter>` (the counters not zero), `sink` (described), and `gcParts` while its
   * partitions are being unlinked
   */
  meta: string;
  /** hash: counters of a crawl registered before partitions (status still reads it) */
  counters: string;
  /**
   * hash: work being brought into the crawl from outside its jobs (a seeding run, a replay) -> when
   * its lease lapses unless renewed (ms). While it holds an entry the crawl cannot be marked done.
   */
  seeding: string;
  /** hash: why items were dropped as invalid -> how many, a sample of at most MAX_INVALID_REASONS reasons */
  invalidReasons: string;
}

/**
 * One partition of a crawl: the URLs of the hosts whose hash falls on it, in a slot of its own
 * (`{crawlId/p.k}`, spread over the slot space by spreadTag), so every script over a URL's state
 * touches one slot, and a big crawl spreads over a cluster.
 */
export interface PartKeys {
  /**
   * hash: copies of the crawl's state, version and startedAt (so a job's begin reads one slot);
   * `q` URLs waiting in this partition's host queues; `epoch`, raised whenever work is added (the
   * done check); `iL`, `is`, `in`: the seen-URL index's level, split pointer and record count
   */
  part: string;
  /** hash: this partition's share of the status counters, and `dead.<stage>` */
  counters: string;
  /**
   * prefix of the seen-URL index's buckets: `<urlBucket><n>` is a hash of 8-byte fingerprint
   * prefix -> state (lua/includes/urlIndex.lua); the buckets grow in number with the crawl
   */
  urlBucket: string;
  /** prefix of a host's queue: `<hostQueue><host>` is a list of waiting URLs, each its fetch request (encodeRequest) */
  hostQueue: string;
  /** hash: host -> its frontier state, packed "i:c:g:n:h:a" (lua/includes/hosts.lua) */
  hosts: string;
  /** sorted set: host -> when it may next be handed a URL (ms); only hosts with URLs waiting and room in flight */
  ready: string;
  /** sorted set: host -> URLs waiting in its queue (status's busiest hosts; reset and gc find the queues here) */
  backlog: string;
  /** hash: job id -> JSON dead-letter record */
  dead: string;
  /**
   * hash: fingerprint -> the fetch request (encodeRequest: depth, URL, and the referer, redirects or
   * link metadata when there are any) of a URL taken into the fetch stage or beyond, so the
   * reconciler can rebuild a lost job; removed when the URL leaves the last stage
   */
  requests: string;
  /** hash: job id -> when the reconciler first found it pending with no live job behind it (ms) */
  suspects: string;
  /** hash: fingerprint -> how many times the reconciler rebuilt its lost jobs */
  rebuilds: string;
  /** sets, per stage: job ids enqueued and not yet finished / taken by a worker / waiting for a retry */
  pending: Record<Stage, string>;
  active: Record<Stage, string>;
  delayed: Record<Stage, string>;
  /** sets, per stage: jobs parked while the crawl is paused, promoted on resume */
  parked: Record<Stage, string>;
}

export interface PoliteKeys {
  /** hash: a host's politeness state (see acquireHost-2.lua) */
  host(host: string): string;
  /** sorted set: the host's requests in flight (lease id -> expiry) */
  hostLeases(host: string): string;
  /** hash: a proxy's health and rate state */
  proxy(id: string): string;
  /** hash: proxy id -> its URL with the credentials redacted, for status and monitor */
  proxies: string;
  probeLock(id: string): string;
  /** string: a host's robots.txt as fetched (JSON), with a TTL */
  robots(origin: string): string;
  robotsLock(origin: string): string;
  /** hash: a host's sessions of one scope (a crawl), fleet-wide (see applySessionChoice-v.lua) */
  sessions(host: string, scope: string): string;
  /** hash: one session's cookies, `domain;path;name` -> the cookie (JSON) */
  sessionCookies(host: string, scope: string, id: string): string;
  /** sorted set, one per politeness slot: the slot's sessions (`scope host id`) -> when each ends by age (ms) */
  sessionsAlive(host: string): string;
  /** every politeness slot's sessionsAlive, for the fleet's gauge */
  allSessionsAlive(): string[];
}

/**
 * How many slots the hosts' politeness keys are spread over. Every process of a fleet must agree on
 * it (a host's keys must be the same everywhere), so it is a constant of the code, not a setting.
 */
export const POLITE_SHARDS = 16;

/** Pure: which of the POLITE_SHARDS slots holds a host's politeness keys (FNV-1a of the host name). */
export function politeShard(host: string): number {
  return fnv1a(host) % POLITE_SHARDS;
}

export class Keys {
  constructor(readonly prefix: string) {}

  /**
   * BullMQ prefix for one stage's queue; the hash tag puts the whole queue in one slot, each stage's
   * in its own third of the slot space (stageTag): `{fetch}`, `{parse}`, `{write/0}`.
   */
  queuePrefix(stage: Stage): string {
    return `${this.prefix}:{${stageTag(stage, STAGES.indexOf(stage), STAGES.length)}}`;
  }

  /**
   * BullMQ prefix of the render queue: fetch-stage jobs that a browser runs (a URL's job id is the
   * same in either queue, and its state is the fetch stage's). A slot of its own, `{render}`.
   */
  renderQueuePrefix(): string {
    return `${this.prefix}:{render}`;
  }

  /** Set of every registered crawl id, but the collected ones. */
  crawlIndex(): string {
    return `${this.prefix}:crawls`;
  }

  /**
   * Set of the crawls gc collected: only their summary is left (in their meta). Touched, like the
   * crawl index, by plain commands only.
   */
  collectedCrawlIndex(): string {
    return `${this.prefix}:crawls:collected`;
  }

  /** Lock and bookkeeping of the fleet's reconciler (one runs at a time). */
  reconciler(): { lock: string; progress: string } {
    return { lock: `${this.prefix}:reconciler:lock`, progress: `${this.prefix}:reconciler:progress` };
  }

  /** The keys of one crawl as a whole, sharing the hash tag `{crawlId}`. */
  crawl(crawlId: string): CrawlKeys {
    const base = `${this.prefix}:crawl:{${crawlId}}`;
    return {
      meta: `${base}:meta`,
      counters: `${base}:counters`,
      seeding: `${base}:seeding`,
      invalidReasons: `${base}:invalid-reasons`,
    };
  }

  /** The keys of partition `index` of a crawl of `parts` partitions, in a slot of their own. */
  part(crawlId: string, index: number, parts: number): PartKeys {
    const base = `${this.prefix}:crawl:{${spreadTag(crawlId, index, parts)}}`;
    const perStage = (kind: string) => Object.fromEntries(STAGES.map((s) => [s, `${base}:${kind}:${s}`])) as Record<Stage, string>;
    return {
      part: `${base}:part`,
      counters: `${base}:counters`,
      urlBucket: `${base}:u:`,
      hostQueue: `${base}:hq:`,
      hosts: `${base}:hosts`,
      ready: `${base}:ready`,
      backlog: `${base}:backlog`,
      dead: `${base}:dead`,
      requests: `${base}:requests`,
      suspects: `${base}:suspects`,
      rebuilds: `${base}:rebuilds`,
      pending: perStage('pending'),
      active: perStage('active'),
      delayed: perStage('delayed'),
      parked: perStage('parked'),
    };
  }

  /**
   * Politeness state is the fleet's, not one crawl's: two crawls on one host share its limits, and a
   * proxy's health is the same whoever uses it. A host's keys (its state, leases and robots.txt)
   * share the slot `{polite:<n>}`, n = politeShard(host), so one script keeps the host's limits
   * atomic while hosts spread over a cluster's shards; every proxy's keys share `{polite}`.
   */
  polite(): PoliteKeys {
    const tag = (host: string) => `${this.prefix}:{polite:${politeShard(host)}}`;
    const proxies = `${this.prefix}:{polite}`;
    const originHost = (origin: string) => origin.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '').replace(/:\d+$/, '');
    return {
      host: (host: string) => `${tag(host)}:host:${host}`,
      hostLeases: (host: string) => `${tag(host)}:host:${host}:leases`,
      proxy: (id: string) => `${proxies}:proxy:${id}`,
      proxies: `${proxies}:proxies`,
      probeLock: (id: string) => `${proxies}:probe:${id}`,
      robots: (origin: string) => `${tag(originHost(origin))}:robots:${origin}`,
      robotsLock: (origin: string) => `${tag(originHost(origin))}:robots-lock:${origin}`,
      sessions: (host: string, scope: string) => `${tag(host)}:sessions:${scope}:${host}`,
      sessionCookies: (host: string, scope: string, id: string) => `${tag(host)}:session:${scope}:${host}:${id}:cookies`,
      sessionsAlive: (host: string) => `${tag(host)}:sessions-alive`,
      allSessionsAlive: () => Array.from({ length: POLITE_SHARDS }, (_, n) => `${this.prefix}:{polite:${n}}:sessions-alive`),
    };
  }

  /**
   * A file sink's index of what its file holds, in the crawl's slot: `identities` is a set of item
   * identity digests; `state` a hash of the file's path, the byte offset the set covers and a digest
   * of the bytes just before it (see storage's identity-index).
   */
  fileIndex(crawlId: string): { identities: string; state: string } {
    const base = `${this.prefix}:crawl:{${crawlId}}:file`;
    return { identities: `${base}:identities`, state: `${base}:state` };
  }

  /**
   * The WARC output's index, in the crawl's slot: `identities` and `state` as a file sink's (an
   * identity is a record's target URI; the state describes the file being written), and `digests`,
   * a hash of payload digest -> the first capture with it (`<date> <uri>`), for revisit records.
   */
  warcIndex(crawlId: string): { identities: string; state: string; digests: string } {
    const base = `${this.prefix}:crawl:{${crawlId}}:warc`;
    return { identities: `${base}:identities`, state: `${base}:state`, digests: `${base}:digests` };
  }

  /**
   * hash, in the crawl's slot: what `render: "auto"` learnt of each kind of page (its host and
   * directory): `<kind>:r` pages that needed the browser, `<kind>:p` pages whose plain HTML held what
   * the rules look for.
   */
  renderHosts(crawlId: string): string {
    return `${this.prefix}:crawl:{${crawlId}}:render-hosts`;
  }

  /** The crawl's own keys (not its partitions') as a flat list, for `reset`. */
  crawlOwnKeys(crawlId: string): string[] {
    return [...Object.values(this.fileIndex(crawlId)), ...Object.values(this.warcIndex(crawlId)), ...Object.values(this.crawl(crawlId)), this.renderHosts(crawlId)];
  }

  /**
   * A partition's fixed keys as a flat list, for `reset`. Its index buckets and host queues are
   * named by number and host: `partitionBuckets` and the backlog find them.
   */
  partFixedKeys(k: PartKeys): string[] {
    return [k.part, k.counters, k.hosts, k.ready, k.backlog, k.dead, k.requests, k.suspects, k.rebuilds, ...STAGES.flatMap((s) => [k.pending[s], k.active[s], k.delayed[s], k.parked[s]])];
  }
}
