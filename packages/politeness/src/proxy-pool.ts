import { proxyAgents } from '@crawlfleet/fetch';
import type { Agents } from 'got';
import type { Keys, Logger, RedisClient } from '@crawlfleet/core';
import { healthFromHash, type ProxyHealth } from './proxy-health.js';
import type { ProxyEntry } from './proxy-list.js';

/** How long a fetcher reuses the pool's health before reading it again from Redis. */
const HEALTH_CACHE_MS = 250;

/** Every proxy the fleet has registered, with its health: for status and monitor (labels only). */
export async function readProxyHealth(redis: RedisClient, keys: Keys): Promise<ProxyHealth[]> {
  const k = keys.polite();
  const labels = await redis.hgetall(k.proxies);
  const ids = Object.keys(labels).sort((a, b) => labels[a]!.localeCompare(labels[b]!));
  if (ids.length === 0) return [];
  const pipeline = redis.pipeline();
  for (const id of ids) pipeline.hgetall(k.proxy(id));
  const hashes = (await pipeline.exec()) ?? [];
  return ids.map((id, i) => healthFromHash(id, labels[id]!, (hashes[i]?.[1] as Record<string, string>) ?? {}));
}

/** How a request goes through a proxy: with `resolveNames` the proxy resolves the name (outside the SSRF guard). */
export interface ProxyMode {
  resolveNames: boolean;
}

export interface ProbeOptions {
  /** how often a fetcher looks for banned proxies due a probe */
  intervalMs: number;
  /** the first probe of a banned proxy comes this long after the ban; later ones back off */
  firstAfterMs: number;
  /** does this proxy carry a request again? (proxy-probe.ts: never to a URL a crawled page chose) */
  probe: (entry: ProxyEntry, agents: Agents) => Promise<boolean>;
}

/**
 * The proxies one fetcher uses: tunnel agents per proxy (kept alive, with a connect timeout so a
 * hung proxy cannot hang a request; one pair that tunnels to the vetted address, one that lets the
 * proxy resolve names, made when a spider asks for it), the shared health read from Redis, and the
 * background probe that returns a banned proxy to service when it recovers. Only one fetcher in the
 * fleet probes a given proxy at a time.
 */
export class ProxyPool {
  private readonly agentsById = new Map<string, ReturnType<typeof proxyAgents>>();
  private readonly options: { keepAlive: boolean; keepAliveMsecs: number; maxSockets: number; maxFreeSockets: number; timeout: number };
  private cached: { at: number; health: Promise<ProxyHealth[]> } | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    readonly entries: ProxyEntry[],
    private readonly log: Logger,
    connectTimeoutMs = 10_000,
  ) {
    this.options = { keepAlive: true, keepAliveMsecs: 1000, maxSockets: 256, maxFreeSockets: 64, timeout: connectTimeoutMs };
  }

  get size(): number {
    return this.entries.length;
  }

  async register(): Promise<void> {
    if (this.entries.length === 0) return;
    await this.redis.hset(this.keys.polite().proxies, Object.fromEntries(this.entries.map((e) => [e.id, e.label])));
  }

  agents(id: string, mode: ProxyMode = { resolveNames: false }): Agents {
    const key = `${id}${mode.resolveNames ? ':names' : ''}`;
    let agents = this.agentsById.get(key);
    if (!agents) {
      agents = proxyAgents({ ...this.options, proxy: this.entries.find((e) => e.id === id)!.url, resolveNames: mode.resolveNames });
      this.agentsById.set(key, agents);
    }
    return agents;
  }

  /** The pool's health, at most HEALTH_CACHE_MS old: one pipelined read serves many requests. */
  health(): Promise<ProxyHealth[]> {
    const now = Date.now();
    if (!this.cached || now - this.cached.at > HEALTH_CACHE_MS) {
      const k = this.keys.polite();
      const pipeline = this.redis.pipeline();
      for (const e of this.entries) pipeline.hgetall(k.proxy(e.id));
      const health = pipeline.exec().then((results) => this.entries.map((e, i) => healthFromHash(e.id, e.label, (results?.[i]?.[1] as Record<string, string>) ?? {})));
      health.catch(() => (this.cached = undefined));
      this.cached = { at: now, health };
    }
    return this.cached.health;
  }

  /** Forget the cached health, after an outcome changed it (a ban). */
  invalidate(): void {
    this.cached = undefined;
  }

  startProbing(options: ProbeOptions): void {
    if (this.entries.length === 0) return;
    const tick = async () => {
      try {
        await this.probeDue(options);
      } catch (err) {
        this.log.warn({ err: { message: (err as Error).message } }, 'proxy probe round failed');
      }
      this.timer = setTimeout(tick, options.intervalMs);
      this.timer.unref();
    };
    this.timer = setTimeout(tick, options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    for (const a of this.agentsById.values()) {
      a.http.destroy();
      a.https.destroy();
    }
  }

  private async probeDue(options: ProbeOptions): Promise<void> {
    const k = this.keys.polite();
    const now = Date.now();
    for (const health of await this.health()) {
      if (!health.banned || (health.probeAt ?? 0) > now) continue;
      if ((await this.redis.set(k.probeLock(health.id), '1', 'PX', 30_000, 'NX')) !== 'OK') continue;
      const entry = this.entries.find((e) => e.id === health.id)!;
      let failure: string | undefined;
      const alive = await options.probe(entry, this.agents(entry.id)).catch((err: { code?: string; message?: string }) => {
        failure = `${err.code ? `${err.code}: ` : ''}${err.message ?? String(err)}`;
        return false;
      });
      if (alive) {
        await this.redis.hset(k.proxy(health.id), { banned: '0', consec: '0', probeAt: '', recoveredAt: String(Date.now()) });
        this.log.info({ proxy: entry.label }, 'proxy recovered: back in rotation');
      } else {
        const bannedFor = now - Number((await this.redis.hget(k.proxy(health.id), 'bannedAt')) ?? now);
        const next = Math.min(Math.max(options.firstAfterMs, bannedFor), 60_000);
        await this.redis.hset(k.proxy(health.id), 'probeAt', String(Date.now() + next));
        this.log.debug({ proxy: entry.label, retryInMs: next, ...(failure ? { reason: failure } : {}) }, 'proxy still down');
      }
      await this.redis.del(k.probeLock(health.id));
      this.invalidate();
    }
  }
}
