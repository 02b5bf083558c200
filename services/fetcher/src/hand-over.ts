import { NonRetryableError, jobId, type PageRecord, type ParseJob } from '@crawlfleet/core';
import type { CounterIncrements } from '@crawlfleet/crawl';
import { encodeBody, flatHeaders } from '@crawlfleet/fetch';
import { parsePage } from '@crawlfleet/parser';
import { GiveUpError, type StageResult } from '@crawlfleet/runtime';
import type { Answer } from './answer.js';

/** The parse job's fields but its body: the page as fetched, with its capture, its record and what a code spider's hooks read. */
export function parseFields(answer: Answer, record: PageRecord | undefined): Omit<ParseJob, 'body'> {
  const { data, spiderModule } = answer.run;
  const { page, fetchedAt, capture } = answer;
  return {
    crawlId: data.crawlId,
    url: data.url,
    finalUrl: page.url,
    depth: data.depth,
    status: page.status,
    contentType: page.contentType ?? '',
    fetchedAt,
    ...(capture ? { capture } : {}),
    ...(record ? { page: record } : {}),
    // only a code spider's parse hook reads them; never Set-Cookie and other credentials (Bull Board shows jobs)
    ...(spiderModule ? { headers: flatHeaders(page.headers) } : {}),
    ...(data.meta ? { meta: data.meta } : {}),
  };
}

/**
 * Parse here or hand over: with PARSE_IN_FETCHER the page is parsed in this fetcher, otherwise its
 * parse job is handed to the parse stage. `renderSkipped`: `auto` judged that the page needs no browser.
 */
export async function parseHereOrHandOver(answer: Answer, record: PageRecord | undefined, renderSkipped: boolean): Promise<StageResult> {
  const fields = parseFields(answer, record);
  const counters = { ...answer.fetched.counters, ...(renderSkipped ? { renderSkipped: 1 } : {}) };
  if (answer.stage.ctx.env.parseInFetcher) return await parseHere(answer, fields, counters);
  return handToParser(answer, fields, counters);
}

/** Parsed here: the page's items go straight to the writers, and its URL is marked parsed. */
async function parseHere(answer: Answer, fields: Omit<ParseJob, 'body'>, counters: CounterIncrements): Promise<StageResult> {
  const { stage, run, fetched, archive } = answer;
  const { crawl, fingerprint, incarnation, spiderModule } = run;
  const parsed = await parsePage(stage.ctx, { page: { ...fields, body: answer.page.body }, crawl, fingerprint, incarnation, spiderModule, settledUrls: stage.settledUrls }).catch((err: unknown) => {
    // A page that cannot be parsed was still fetched: its fetch counts, as in the parse stage.
    if (err instanceof NonRetryableError) throw new GiveUpError(err.code, err.message, { ...fetched, ...archive }, err.context);
    throw err;
  });
  return { ...fetched, url: { fingerprint, state: 'p' }, counters: { ...counters, ...parsed.counters }, ...(parsed.handOver ? { handOver: parsed.handOver } : {}) };
}

/** The parse job: made pending by this job's finish, then added (the harness). */
function handToParser(answer: Answer, fields: Omit<ParseJob, 'body'>, counters: CounterIncrements): StageResult {
  return {
    ...answer.fetched,
    counters,
    handOver: { stage: 'parse', id: jobId('parse', answer.run.fingerprint), data: { ...fields, body: encodeBody(answer.page.body) }, opts: { attempts: 3, backoff: { type: 'crawlfleet' } } },
  };
}
