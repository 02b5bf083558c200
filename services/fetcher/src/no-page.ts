import { RetryableError, errorMessage, type FetchJob } from '@crawlfleet/core';
import type { PoliteFetchOutcome } from '@crawlfleet/politeness';
import { DeferError, type StageResult } from '@crawlfleet/runtime';
import type { FetchJobInput, FetchStage } from './fetch-context.js';

/** A polite fetch that brought no page back: wait, disallowed by robots.txt, robots.txt unavailable, or failed. */
export type NoPage = Exclude<PoliteFetchOutcome, { kind: 'response' }>;

/**
 * Pure: the proxy to go around when a request failed. A proxy that failed is not the URL's fault: the
 * job goes again through another, without spending an attempt, until every proxy has been tried
 * once. Undefined: the failure is the URL's.
 */
export function proxyToGoAround<P>(failure: { proxyFault: boolean; proxy: P | undefined }, avoided: readonly unknown[], poolSize: number): P | undefined {
  return failure.proxyFault && failure.proxy && avoided.length < poolSize ? failure.proxy : undefined;
}

/** The end of a job whose fetch brought no page: parked (DeferError), skipped (robots.txt), retried, or failed. */
export async function settleWithoutPage(stage: FetchStage, run: FetchJobInput, outcome: NoPage): Promise<StageResult> {
  switch (outcome.kind) {
    case 'wait':
      throw new DeferError(outcome.waitMs, outcome.reason);
    case 'disallowed':
      return { counters: { skipped: 1 }, url: { fingerprint: run.fingerprint, state: 'R' } };
    case 'robots-unavailable':
      throw new RetryableError('ERR_ROBOTS_UNAVAILABLE', outcome.reason, { url: run.data.url });
    case 'error':
      return await failedRequest(stage, run, outcome);
  }
}

/** A request that failed: through another proxy when its proxy failed (DeferError), else the error itself. */
async function failedRequest(stage: FetchStage, run: FetchJobInput, outcome: Extract<NoPage, { kind: 'error' }>): Promise<never> {
  const { data } = run;
  stage.ctx.metrics.fetchError((outcome.error as { code?: string }).code ?? 'ERR_UNKNOWN');
  const avoid = data.avoidProxies ?? [];
  const proxy = proxyToGoAround(outcome, avoid, stage.pool.size);
  if (proxy) {
    await run.job.updateData({ ...data, avoidProxies: [...avoid, proxy.id] } satisfies FetchJob);
    throw new DeferError(50, `proxy ${proxy.label} failed: ${errorMessage(outcome.error)}`);
  }
  throw outcome.error;
}
