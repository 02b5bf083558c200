import { RetryableError, renderSettings, type Spider } from '@crawlfleet/core';

/** What a fetch handler does besides its requests (Redis round trips, hooks), on a busy machine. */
export const DEADLINE_SLACK_MS = 60_000;

/**
 * Pure: the hard deadline of one run of a fetch handler, from the spider's own timeouts: robots.txt
 * and the page, each a request under `limits.timeoutMs`; in a browser, the page's load, the taking
 * of its DOM and its close, each under `render.timeoutMs`, and the wait under `waitFor.maxWaitMs`.
 */
export function fetchDeadlineMs(spider: Pick<Spider, 'limits' | 'render'>, inBrowser: boolean, slackMs = DEADLINE_SLACK_MS): number {
  const robots = spider.limits.timeoutMs;
  if (!inBrowser) return robots + spider.limits.timeoutMs + slackMs;
  const render = renderSettings(spider);
  return robots + 3 * render.timeoutMs + render.waitFor.maxWaitMs + slackMs;
}

/** A handler ran past its deadline: it was told to stop, and the job is retried, then dead-lettered. */
export class HandlerDeadlineError extends RetryableError {
  constructor(stage: string, deadlineMs: number, url: string) {
    super('ERR_HANDLER_DEADLINE', `the ${stage} handler did not finish within ${deadlineMs} ms: stopped`, { url, stage });
  }
}

/**
 * Runs `work` for at most `deadlineMs`: past it, `work`'s signal is aborted (it lets go of what it
 * holds: a browser page, a socket) and the returned promise rejects with `expired()` at once, so
 * the caller's slot is free whether or not `work` ever settles.
 */
export async function withDeadline<T>(deadlineMs: number, work: (signal: AbortSignal) => Promise<T>, expired: () => Error): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = expired();
      controller.abort(err);
      reject(err);
    }, deadlineMs);
  });
  const running = work(controller.signal);
  // Settling after the deadline: nobody waits for it any more.
  running.catch(() => undefined);
  try {
    return await Promise.race([running, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
