import { join } from 'node:path';
import { loadEnv, validateSpider } from '@crawlfleet/core';
import { admitToPartition } from '@crawlfleet/frontier';
import { admissionPolicy, crawlTake, getStatus, reconcileCrawl, registerCrawl } from '@crawlfleet/crawl';
import { createFleetContext, type FleetContext } from '@crawlfleet/runtime';
import { dropPrefix, tempDir, testEnv, uniquePrefix } from '../helpers/cli.js';

// The reconciler's lock gives the fleet one round per interval, not one round at a time: a round
// that takes longer than its interval (a loaded machine, many crawls) runs beside the next. Two
// rounds that both find the same job lost must redo its URL once, and count it once.
describe('two reconciler rounds at once', () => {
  const prefix = uniquePrefix('rounds');
  let ctx: FleetContext;
  beforeAll(async () => {
    ctx = await createFleetContext({ env: loadEnv(testEnv(prefix)), name: 'rounds-test' });
  });
  afterAll(async () => {
    await ctx.close();
    await dropPrefix(prefix);
  });

  test('each lost job is rebuilt once and counted reconciled once', async () => {
    const spider = validateSpider({ name: 'rounds', startUrls: [] });
    const sink = { kind: 'jsonl' as const, path: join(tempDir('rounds'), 'items.jsonl') };
    const { layout } = await registerCrawl(ctx.redis, ctx.keys, 'rounds', spider, sink);
    const crawl = (await ctx.crawls.get('rounds'))!;
    // Three URLs admitted and taken into the fetch stage, with no job behind them (a seeder that died before its add).
    const lost = Array.from({ length: 3 }, (_, i) => ({ url: `http://127.0.0.1:9/lost/${i}.html`, depth: 0, verdict: 'admit' as const }));
    const k = ctx.keys.part('rounds', 0, layout.parts);
    expect((await admitToPartition(ctx.redis, k, 'rounds', lost, admissionPolicy(spider), crawlTake(2000, layout, spider))).taken).toHaveLength(3);
    const options = { graceMs: 1000, nowMs: 1_000_000 };
    // The first round finds them lost and records when; the next two, past the grace, both act.
    expect(await reconcileCrawl(ctx.redis, ctx.keys, ctx.queues, crawl, options)).toMatchObject({ suspects: 3, rebuilt: 0 });
    const later = { ...options, nowMs: options.nowMs + 5000 };
    await Promise.all([reconcileCrawl(ctx.redis, ctx.keys, ctx.queues, crawl, later), reconcileCrawl(ctx.redis, ctx.keys, ctx.queues, crawl, later)]);
    const status = await getStatus(ctx.redis, ctx.keys, 'rounds');
    expect(status?.counters).toMatchObject({ reconciled: 3, failed: 0 });
    expect(await ctx.redis.hvals(k.rebuilds)).toEqual(['1', '1', '1']);
    expect(await ctx.queues.fetch.getJobCounts('waiting', 'prioritized', 'delayed')).toEqual({ waiting: 3, prioritized: 0, delayed: 0 });
  });
});
