import { Redis } from 'ioredis';
import { Keys, RENDER_QUEUE, closeQueues, createQueues, jobId, urlFingerprint, validateSpider, type Queues } from '@crawlfleet/core';
import { admitAndEnqueue, crawlTake, fetchJobData, registerCrawl, type CrawlLayout } from '@crawlfleet/crawl';
import { REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/cli.js';

// Issue 28, A5: a page of `render: "auto"` whose fetch job went on to the render queue (the plain
// page was judged to need a browser) is pending in the fetch stage while its render job waits. A link
// to it found meanwhile must not enqueue it again in the fetch queue: that copy ran a plain fetch
// beside the render job, under the same host lease (two requests at a host limited to one).

describe('admission of a link to a page waiting in the render queue (render "auto")', () => {
  const prefix = uniquePrefix('render-routing');
  const keys = new Keys(prefix);
  const redis = new Redis(REDIS_URL);
  let queues: Queues;
  beforeAll(() => {
    queues = createQueues(redis, keys);
  });
  afterAll(async () => {
    await closeQueues(queues);
    redis.disconnect();
    await dropPrefix(prefix);
  });

  test('the link enqueues nothing while the render job exists; a job lost from both queues is enqueued again', async () => {
    const crawlId = 'auto';
    const spider = validateSpider({ name: 'auto', startUrls: ['http://shop.test/'], allowPrivateAddresses: true, render: 'auto', follow: [{ css: 'a' }] }, 'test spider');
    const { layout } = await registerCrawl(redis, keys, crawlId, spider, { kind: 'jsonl', path: '/dev/null' });
    const crawl: CrawlLayout & { spider: typeof spider } = { ...layout, spider };
    const url = 'http://shop.test/app/1.html';
    const id = jobId('fetch', urlFingerprint(crawlId, url));
    const found = () => admitAndEnqueue(redis, keys, queues, crawl, [{ url, depth: 1, verdict: 'admit' }], { take: crawlTake(2000, layout, spider) });
    const where = async () => ({ fetch: (await queues.fetch.getJob(id)) !== undefined, render: (await queues.render.getJob(id)) !== undefined });

    // Admitted and taken into the fetch stage: its job waits in the fetch queue.
    expect(await found()).toEqual({ seen: 1, skipped: 0 });
    expect(await where()).toEqual({ fetch: true, render: false });

    // A fetcher judged the plain page and sent it on, as the stage harness does: the render job is
    // added under the same id, then the fetch job completes (and is removed). The id stays pending.
    await queues.render.add(RENDER_QUEUE, fetchJobData(crawlId, { url, depth: 1 }), { jobId: id });
    await (await queues.fetch.getJob(id))!.remove();
    expect(await where()).toEqual({ fetch: false, render: true });

    // Another page links to it: nothing is added to the fetch queue.
    expect(await found()).toEqual({ seen: 0, skipped: 0 });
    expect(await where()).toEqual({ fetch: false, render: true });

    // Lost from both queues (removed by hand): the link enqueues it again, in the fetch queue.
    await (await queues.render.getJob(id))!.remove();
    await found();
    expect(await where()).toEqual({ fetch: true, render: false });
  });
});
