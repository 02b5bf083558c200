import { STAGES, runScript, type Keys, type PartKeys, type RedisClient } from '@crawlfleet/core';
import { allPartKeys, type CrawlLayout } from './layout.js';
import { INJECTION_LEASE_MS, copyStateToPartitions } from './registry.js';

/**
 * When is a crawl done? When none of its jobs is pending in any stage and no URL waits in any host
 * queue, in every partition at one moment. A script cannot read several slots, so this is checked
 * from outside the partitions, exactly:
 *
 * 1. Work appears in a partition only from a job that is itself pending somewhere in the crawl (a
 *    parse job admits its links into any partition before its own finish, and hands its URL to the
 *    write stage in its own partition, in the step that ends it), or from outside the crawl's jobs:
 *    a seeding run or a replay, which hold an entry in the crawl's `seeding` hash from before their
 *    first change to after their last, and raise the crawl's `gen` at both ends
 *    (beginInjection-2.lua, endInjection-2.lua). So while a crawl has work, some partition is busy
 *    or an injection is open, at every moment.
 * 2. Every change that may turn an idle partition busy raises its `epoch` (an admission, a replay).
 *    A partition read idle twice with the same epoch was idle all the time between the two reads.
 * 3. Read `gen`; read every partition (idle? epoch); read them all again. If all were idle both
 *    times with unchanged epochs, then at the moment between the two collects every partition was
 *    idle: by (1) no job was pending and nothing could appear except by an injection.
 *    markDone-2.lua then marks the crawl done only if `gen` is unchanged and no injection is open,
 *    which rules out an injection that began after step 3 started (it raised gen) or is still open.
 *
 * It runs when a finish left its partition idle, and after seeding, a replay, a resume and the
 * reconciler's repairs; its cost (two reads of each partition) is paid only then.
 */
export async function settleCrawl(redis: RedisClient, keys: Keys, layout: CrawlLayout, hooks?: SettleHooks): Promise<boolean> {
  const meta = keys.crawl(layout.crawlId);
  const [state, gen] = await redis.hmget(meta.meta, 'state', 'gen');
  if (state !== 'running') return false;
  const parts = allPartKeys(keys, layout);
  const first = await collect(redis, parts);
  if (!first.every((p) => p.idle)) return false;
  const second = await collect(redis, parts);
  if (!second.every((p, i) => p.idle && p.epoch === first[i]!.epoch)) return false;
  if ((await runScript<number>(redis, 'markDone', [meta.meta, meta.seeding], [gen ?? '0', new Date().toISOString()])) !== 1) return false;
  await hooks?.afterMarkDone?.();
  // The partitions' copies say done too: a job that begins after it is dropped, and a late
  // admission is refused (docs/architecture.md, "Work that arrives after done"). Each only if no run
  // began since (a re-seed, a replay): those raise gen and stamp the copies they write with it.
  await Promise.all(parts.map((k) => runScript<number>(redis, 'markPartDone', [k.part], [gen ?? '0'])));
  return true;
}

/** Test hooks of settleCrawl. */
export interface SettleHooks {
  /** Runs after the crawl's record is marked done, before its partitions' copies are: where a re-seed may land. */
  afterMarkDone?: () => Promise<void>;
}

/**
 * A crawl marked done (or failed) that has work pending or waiting was marked so on writes that a
 * Redis failover took back: the finish of a partition's last job, lost with the last writes of its
 * master while the done mark, on another master, survived. It runs again, as a replay runs it, and
 * the reconciler's repairs redo the lost work; it ends done again, exact. Returns its state after.
 */
export async function reopenWithWork(redis: RedisClient, keys: Keys, layout: CrawlLayout, id: string): Promise<string> {
  return whileInjecting(redis, keys, layout, id, async () => (await redis.hget(keys.crawl(layout.crawlId).meta, 'state')) ?? '', true);
}

interface PartitionReading {
  idle: boolean;
  epoch: string;
}

/** One read of every partition, all at once (one round trip per partition, each maybe on its own shard). */
async function collect(redis: RedisClient, parts: PartKeys[]): Promise<PartitionReading[]> {
  return Promise.all(
    parts.map(async (k) => {
      const pipeline = redis.pipeline();
      for (const stage of STAGES) pipeline.scard(k.pending[stage]);
      pipeline.hmget(k.part, 'q', 'epoch');
      const results = (await pipeline.exec()) ?? [];
      for (const [err] of results) if (err) throw err;
      const pending = results.slice(0, STAGES.length).reduce((n, [, v]) => n + Number(v), 0);
      const [q, epoch] = results[STAGES.length]![1] as (string | null)[];
      return { idle: pending === 0 && Number(q ?? 0) === 0, epoch: epoch ?? '0' };
    }),
  );
}

/**
 * Runs `work` (which brings URLs or jobs into the crawl from outside its jobs) as an injection: the
 * crawl cannot be marked done while it runs, and a done check that began before it is voided.
 * `reopen` runs a crawl that had ended done or failed again (a replay). `opened`: the injection was
 * opened already, by the registration of a seeding run (registerCrawl's `injection`). The crawl is
 * checked for completion afterwards (a seed that admitted nothing new may finish it). Returns
 * work's result.
 */
export async function whileInjecting<T>(redis: RedisClient, keys: Keys, layout: CrawlLayout, id: string, work: () => Promise<T>, reopen = false, opened = false): Promise<T> {
  const k = keys.crawl(layout.crawlId);
  if (!opened) {
    const [state, gen] = await runScript<[string, number]>(redis, 'beginInjection', [k.meta, k.seeding], [id, INJECTION_LEASE_MS, reopen ? '1' : '']);
    // A crawl run again: its partitions' copies of the state say so, where jobs and admissions read
    // it, stamped with the gen of the reopen (a late `done` of the run before does not overwrite them).
    if (reopen && state === 'running') await copyStateToPartitions(redis, keys, layout, { state, gen });
  }
  const renew = setInterval(() => {
    runScript(redis, 'beginInjection', [k.meta, k.seeding], [id, INJECTION_LEASE_MS, '']).catch(() => undefined);
  }, INJECTION_LEASE_MS / 4);
  renew.unref();
  try {
    return await work();
  } finally {
    clearInterval(renew);
    await runScript(redis, 'endInjection', [k.meta, k.seeding], [id]);
    await settleCrawl(redis, keys, layout);
  }
}

/**
 * Ends the injections whose lease lapsed by Redis's clock (their process died): how many. Each is
 * checked and ended in one step, so a lease renewed meanwhile stays.
 */
export async function endLapsedInjections(redis: RedisClient, keys: Keys, layout: CrawlLayout): Promise<number> {
  const k = keys.crawl(layout.crawlId);
  let ended = 0;
  for (const id of await redis.hkeys(k.seeding)) ended += await runScript<number>(redis, 'endInjection', [k.meta, k.seeding], [id, '1']);
  if (ended > 0) await settleCrawl(redis, keys, layout);
  return ended;
}
