import type { SettledUrls } from '@crawlfleet/crawl';
import type { UserAgentRotation } from '@crawlfleet/fetch';
import type { PoliteFetcher, ProxyPool } from '@crawlfleet/politeness';
import type { PageRenderer } from '@crawlfleet/render';
import type { FleetContext, StageHandlerInput } from '@crawlfleet/runtime';
import type { RenderRouting } from './render-routing.js';

/** What every job of one fetch stage works with, wired once when the stage starts (startFetchStage). */
export interface FetchStage {
  ctx: FleetContext;
  /** a renderer's browser: its pages load in Chromium instead of one plain request; absent in a fetcher */
  renderer: PageRenderer | undefined;
  routing: RenderRouting;
  settledUrls: SettledUrls;
  userAgents: UserAgentRotation;
  pool: ProxyPool;
  polite: PoliteFetcher;
  /** the proxies' registration in Redis: every job waits for it */
  registered: Promise<void>;
}

/** One run of a fetch job, as the harness hands it to the handler. */
export type FetchJobInput = StageHandlerInput<'fetch'>;
