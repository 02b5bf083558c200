import { cancelCrawl, pauseCrawl, resetCrawl, resumeCrawl } from '@crawlfleet/crawl';
import { withContext } from '../context.js';
import { envWith } from '../options.js';

import { CONTROL_ACTIONS } from '../arguments.js';

export { CONTROL_ACTIONS };
export type ControlAction = (typeof CONTROL_ACTIONS)[number];

export async function controlCommand(action: ControlAction, options: { crawlId: string; redis?: string }): Promise<number> {
  const env = envWith(options);
  const message = await withContext(env, async ({ redis, keys, queues }) => {
    const id = options.crawlId;
    switch (action) {
      case 'pause':
        return `crawl ${id} ${await pauseCrawl(redis, keys, id)}`;
      case 'resume':
        return `crawl ${id} ${await resumeCrawl(redis, keys, queues, id, env.frontierWindow)}`;
      case 'cancel':
        return `crawl ${id} ${await cancelCrawl(redis, keys, queues, id)}`;
      case 'reset': {
        const { removedJobs } = await resetCrawl(redis, keys, queues, id);
        return `crawl ${id} reset: ${removedJobs} queued jobs removed, frontier and counters forgotten, stored items kept`;
      }
    }
  });
  process.stdout.write(`${message}\n`);
  return 0;
}
