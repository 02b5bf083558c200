import { createHash } from 'node:crypto';
import type { connectRedis } from '@crawlfleet/core';

/** The fleet's ioredis client (core's connectRedis), named through core so storage needs no ioredis of its own. */
export type IndexRedis = Awaited<ReturnType<typeof connectRedis>>;

/**
 * What an index says of the file it describes: the identities of every record before `offset` are
 * in it. `tail` is a digest of the bytes just before `offset`, so a file that was replaced or cut
 * since is not taken for the one indexed.
 */
export interface IndexState {
  path: string;
  offset: number;
  tail: string;
}

/**
 * The identities a file sink has written, kept outside the writer's memory. The file stays the
 * truth: an index that lags it is brought up to date from the file, one that does not match it is
 * cleared and rebuilt.
 */
export interface IdentityIndex {
  state(): Promise<IndexState | undefined>;
  /** the recorded state, and which of these digests are held, in one look */
  lookup(digests: Buffer[]): Promise<{ state: IndexState | undefined; held: boolean[] }>;
  /** adds digests, then (when given) records the state: a crash between leaves the state behind, never ahead */
  record(digests: Buffer[], state?: IndexState): Promise<void>;
  /** forgets everything: the file is not the one indexed */
  clear(): Promise<void>;
}

/** 16 bytes of SHA-256: a fixed, small cost per item whatever the key's length (collisions ~2^-64 at 2^32 items). */
export function identityDigest(identity: string): Buffer {
  return createHash('sha256').update(identity).digest().subarray(0, 16);
}

/** The digest a state keeps of the bytes before its offset. */
export function tailDigest(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('base64');
}

function parseState(hash: Record<string, string>): IndexState | undefined {
  const offset = Number(hash.offset);
  if (hash.path === undefined || hash.tail === undefined || !Number.isSafeInteger(offset) || offset < 0) return undefined;
  return { path: hash.path, offset, tail: hash.tail };
}

/** Adds of this many digests at most per command, so a rebuild of a large file sends bounded commands. */
const ADD_CHUNK = 1000;

/**
 * The index in Redis, in the crawl's slot (Keys.fileIndex): a set of 16-byte digests, and a hash
 * with the state. About 70 bytes of Redis memory per item (docs/reliability.md).
 */
export class RedisIdentityIndex implements IdentityIndex {
  constructor(
    private readonly redis: IndexRedis,
    private readonly keys: { identities: string; state: string },
  ) {}

  async state(): Promise<IndexState | undefined> {
    return parseState(await this.redis.hgetall(this.keys.state));
  }

  async lookup(digests: Buffer[]): Promise<{ state: IndexState | undefined; held: boolean[] }> {
    const pipeline = this.redis.pipeline().hgetall(this.keys.state);
    if (digests.length > 0) pipeline.smismember(this.keys.identities, ...digests);
    const results = (await pipeline.exec()) ?? [];
    for (const [err] of results) if (err) throw err;
    const state = parseState(results[0]![1] as Record<string, string>);
    const held = digests.length > 0 ? (results[1]![1] as number[]).map((n) => n === 1) : [];
    return { state, held };
  }

  async record(digests: Buffer[], state?: IndexState): Promise<void> {
    for (let i = 0; i < digests.length; i += ADD_CHUNK) await this.redis.sadd(this.keys.identities, ...digests.slice(i, i + ADD_CHUNK));
    if (state) await this.redis.hset(this.keys.state, { path: state.path, offset: String(state.offset), tail: state.tail });
  }

  async clear(): Promise<void> {
    // the state first: a crash between leaves no state, so the next open rebuilds from the start
    await this.redis.del(this.keys.state);
    await this.redis.del(this.keys.identities);
  }
}
