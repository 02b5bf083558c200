import { renderModeFor, renderSettings } from '@crawlfleet/core';
import { bodyHash } from '@crawlfleet/crawl';
import { isParseable } from '@crawlfleet/fetch';
import type { StageResult } from '@crawlfleet/runtime';
import { answerOf, toWriters, visitRecord, type Answer } from './answer.js';
import type { FetchJobInput, FetchStage } from './fetch-context.js';
import { parseHereOrHandOver } from './hand-over.js';
import { settleWithoutPage } from './no-page.js';
import { goesToBrowserFirst, judgePlainPage } from './render-route.js';
import { politeFetch } from './request.js';
import { settleVerdict } from './verdict.js';

/**
 * One fetch job (the fetch stage's handler, a renderer's too), step by step:
 * route (plain or render) → polite fetch (the host's turn, the session, the request built) → classify → record the visit →
 * judge the plain page (`auto`) → parse here or hand over. Each step that ends the job returns its
 * result or throws (DeferError, RetryableError, GiveUpError) for the harness to finish it.
 */
export async function fetchJob(stage: FetchStage, run: FetchJobInput): Promise<StageResult> {
  await stage.registered;
  const mode = renderModeFor(renderSettings(run.crawl.spider), run.data.url);
  if (await goesToBrowserFirst(stage, run, mode)) return { reroute: 'render' };
  const outcome = await politeFetch(stage, run);
  if ('sessions' in outcome && outcome.sessions) stage.ctx.metrics.sessions(outcome.sessions);
  if (outcome.kind !== 'response') return await settleWithoutPage(stage, run, outcome);
  const answer = answerOf(stage, run, outcome);
  const settled = await settleVerdict(answer);
  if (settled) return settled;
  const visited = recordVisit(answer);
  // The same body as at the last visit: its items are those stored already.
  if (visited?.outcome === 'unchanged') return { ...answer.fetched, counters: { fetched: 1, unchanged: 1 }, ...toWriters(answer, visited.record) };
  // A page that is not parsed goes to the writers with its exchange and its record, if it has them.
  if (!isParseable(answer.page.contentType, answer.page.body)) return { ...answer.fetched, ...toWriters(answer, visited?.record) };
  const judged = await judgePlainPage(answer, mode);
  if (judged === 'render') return { reroute: 'render' };
  return await parseHereOrHandOver(answer, visited?.record, judged === 'plain');
}

/** Record the visit (a spider with `recrawl`): the URL's record after it, with the body's hash; undefined without recrawl. */
function recordVisit(answer: Answer): ReturnType<typeof visitRecord> | undefined {
  const { recrawl } = answer.run.crawl.spider;
  return recrawl ? visitRecord(answer, recrawl, answer.page.status, bodyHash(answer.page.body)) : undefined;
}
