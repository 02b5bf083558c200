import type { RenderMode } from '@crawlfleet/core';
import { extractResponse } from '@crawlfleet/extract';
import { decodePage, isHtml } from '@crawlfleet/fetch';
import { needsRendering } from '@crawlfleet/render';
import type { Answer } from './answer.js';
import type { FetchJobInput, FetchStage } from './fetch-context.js';

/**
 * Pure: where a fetch job's page goes, from the spider's render mode for its URL. A renderer loads
 * whatever it takes (`plain` here: no rerouting); a fetcher sends a page to the render queue when it
 * always needs a browser (`render`), fetches it plainly when it never does (`plain`), and in `auto`
 * asks what pages of its kind taught, then judges the plain page it fetched (`auto`).
 */
export function renderRoute(inRenderer: boolean, mode: RenderMode): 'render' | 'auto' | 'plain' {
  if (inRenderer) return 'plain';
  if (mode === 'always') return 'render';
  return mode === 'auto' ? 'auto' : 'plain';
}

/** Route: does the page go to the render queue before any fetch? */
export async function goesToBrowserFirst(stage: FetchStage, run: FetchJobInput, mode: RenderMode): Promise<boolean> {
  // A page that needs a browser goes to the render queue: always, or once pages of its kind are known to need one.
  const route = renderRoute(stage.renderer !== undefined, mode);
  if (route === 'auto') return (await stage.routing.route(run.data.crawlId, run.data.url)) === 'render';
  return route === 'render';
}

/**
 * `auto` judges the plain page (an HTML page a fetcher fetched): a browser only when the rules found
 * nothing and scripts could have built it. The judgment is recorded for the page's kind. Answers
 * `render` (to the render queue), `plain` (judged: the plain page will do) or undefined (not judged).
 */
export async function judgePlainPage(answer: Answer, mode: RenderMode): Promise<'render' | 'plain' | undefined> {
  const { stage, run, page } = answer;
  if (renderRoute(stage.renderer !== undefined, mode) !== 'auto' || !isHtml(page.contentType, page.body)) return undefined;
  const { spider } = run.crawl;
  const text = decodePage(page.body, page.contentType);
  const found = extractResponse({ body: text, contentType: page.contentType, url: page.url }, spider, { crawlId: run.data.crawlId, fetchedAt: answer.fetchedAt });
  const needed = needsRendering(spider, page.url, text, found);
  await stage.routing.record(run.data.crawlId, run.data.url, needed);
  return needed ? 'render' : 'plain';
}
