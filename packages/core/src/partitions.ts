import calculateSlot from 'cluster-key-slot';

/**
 * How a crawl's state spreads over Redis Cluster slots. A crawl's frontier, seen-URL index and
 * in-flight state are split into P partitions by host, each in a hash slot of its own, so one big
 * crawl spreads over a cluster's masters; a host's URLs all live in one partition, so its queue,
 * schedule and budget stay atomic in one script.
 */

/** Pure: FNV-1a of a string (32 bits): the host hash behind partitions and the politeness shards. */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** Pure: the partition (0 .. parts-1) of a host's URLs. */
export function partitionOfHost(host: string, parts: number): number {
  return parts <= 1 ? 0 : fnv1a(host) % parts;
}

/** Redis Cluster's number of hash slots. */
export const CLUSTER_SLOTS = 16384;

const spreadTags = new Map<string, string>();

/**
 * Pure: the hash tag of part `index` of `count` parts of `base`, chosen so that the parts' slots
 * are spread evenly over the slot space: part i's slot lies in the i-th of `count` equal ranges.
 * A cluster's masters serve contiguous ranges of slots (as `redis-cli --cluster create` assigns
 * them), so the parts spread over the masters as evenly as their count allows, where tags hashed at
 * random would often put half of them on one master. The tag is `base/index.k` for the first k that
 * lands in range (about `count` tries), the same on every process.
 */
export function spreadTag(base: string, index: number, count: number): string {
  return firstTagInRange(`${base}\n${index}\n${count}`, index, count, (k) => `${base}/${index}.${k}`);
}

/**
 * Pure: the hash tag of one of the fleet's stage queues (`fetch`, `parse`, `write`, index 0-2 of
 * 3): the stage's name when its slot lies in the stage's third of the slot space, else
 * `name/k` for the first k whose slot does (the write queue's is `write/0`). The three queues are
 * then on three masters of a cluster of three or more, not two of them on one.
 */
export function stageTag(stage: string, index: number, count: number): string {
  return firstTagInRange(`stage\n${stage}\n${index}\n${count}`, index, count, (k) => (k === 0 ? stage : `${stage}/${k - 1}`));
}

function firstTagInRange(cacheKey: string, index: number, count: number, candidate: (k: number) => string): string {
  const cached = spreadTags.get(cacheKey);
  if (cached) return cached;
  const low = Math.floor((index * CLUSTER_SLOTS) / count);
  const high = Math.floor(((index + 1) * CLUSTER_SLOTS) / count);
  let tag = '';
  for (let k = 0; ; k++) {
    tag = candidate(k);
    const slot = calculateSlot(tag);
    if (slot >= low && slot < high) break;
  }
  if (spreadTags.size > 100_000) spreadTags.clear();
  spreadTags.set(cacheKey, tag);
  return tag;
}

/** Pure: the Redis Cluster slot of a key (its hash tag's, when it has one). */
export function keySlot(key: string): number {
  return calculateSlot(key);
}
