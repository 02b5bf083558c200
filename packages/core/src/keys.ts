import { ConfigError } from './errors.js';

/**
 * Every Redis key crawlfleet uses is built here; no other file spells a key.
 *
 * Hash tags keep the fleet Redis Cluster ready:
 * - each queue lives in its own slot: BullMQ prefix `<P>:{fetch}`, so its keys are `<P>:{fetch}:fetch:*`;
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

export interface CrawlKeys {
  /** hash: spider JSON, state, sink, timestamps */
  meta: string;
  /** hash: the status counters */
  counters: string;
  /**
   * hash: the seen-URL index, URL fingerprint -> admission state, packed as 8-byte records into
   * URL_BUCKETS fields (lua/includes/urlIndex.lua; admitUrls-6.lua for the states)
   */
  urls: string;
  /** list: fingerprints of admitted URLs waiting to be taken into the fetch stage (the lean frontier) */
  frontier: string;
  /** hash: job id -> JSON dead-letter record */
  dead: string;
  /**
   * hash: fingerprint -> the fetch request (compact JSON: u url, d depth, x redirects) of a URL in
   * flight in any stage, so the reconciler can rebuild a lost job; removed when the URL leaves the last stage
   */
  requests: string;
  /** hash: job id -> when the reconciler first found it pending with no live job behind it (ms) */
  suspects: string;
  /** hash: fingerprint -> how many times the reconciler rebuilt its lost jobs */
  rebuilds: string;
  /** hash: seeding run id -> when its sentinel lapses unless renewed (ms); see seeder */
  seeding: string;
  /** hash: why items were dropped as invalid -> how many, a sample of at most MAX_INVALID_REASONS reasons */
  invalidReasons: string;
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
}

/**
 * How many slots the hosts' politeness keys are spread over. Every process of a fleet must agree on
 * it (a host's keys must be the same everywhere), so it is a constant of the code, not a setting.
 */
export const POLITE_SHARDS = 16;

/** Pure: which of the POLITE_SHARDS slots holds a host's politeness keys (FNV-1a of the host name). */
export function politeShard(host: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < host.length; i++) {
    hash ^= host.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % POLITE_SHARDS;
}

/** Fields (buckets) of the seen-URL index hash; lua/includes/urlIndex.lua must say the same. */
export const URL_BUCKETS = 65536;

export class Keys {
  constructor(readonly prefix: string) {}

  /** BullMQ prefix for one stage's queue; the hash tag puts the whole queue in one slot. */
  queuePrefix(stage: Stage): string {
    return `${this.prefix}:{${stage}}`;
  }

  /** Set of every registered crawl id. */
  crawlIndex(): string {
    return `${this.prefix}:crawls`;
  }

  /** Lock and bookkeeping of the fleet's reconciler (one runs at a time). */
  reconciler(): { lock: string; progress: string } {
    return { lock: `${this.prefix}:reconciler:lock`, progress: `${this.prefix}:reconciler:progress` };
  }

  /** Every key of one crawl, sharing the hash tag `{crawlId}`. */
  crawl(crawlId: string): CrawlKeys {
    const base = `${this.prefix}:crawl:{${crawlId}}`;
    const perStage = (kind: string) => Object.fromEntries(STAGES.map((s) => [s, `${base}:${kind}:${s}`])) as Record<Stage, string>;
    return {
      meta: `${base}:meta`,
      counters: `${base}:counters`,
      urls: `${base}:urls`,
      frontier: `${base}:frontier`,
      dead: `${base}:dead`,
      requests: `${base}:requests`,
      suspects: `${base}:suspects`,
      rebuilds: `${base}:rebuilds`,
      seeding: `${base}:seeding`,
      invalidReasons: `${base}:invalid-reasons`,
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

  /** Every key of a crawl as a flat list, for `reset`. */
  allCrawlKeys(crawlId: string): string[] {
    const k = this.crawl(crawlId);
    return [
      ...Object.values(this.fileIndex(crawlId)),
      k.meta,
      k.counters,
      k.urls,
      k.frontier,
      k.dead,
      k.requests,
      k.suspects,
      k.rebuilds,
      k.seeding,
      k.invalidReasons,
      ...STAGES.flatMap((s) => [k.pending[s], k.active[s], k.delayed[s], k.parked[s]]),
    ];
  }
}
