import type { Logger } from '@crawlfleet/core';

/** The exit code of a process whose in-flight jobs did not finish within its drain deadline. */
export const EXIT_DRAIN_TIMEOUT = 1;

export interface ShutdownOptions {
  /** the exit code once `stop` has finished (0 by default) */
  exitCode?: (signal: string) => number;
  /**
   * how long `stop` may take (SHUTDOWN_DRAIN_MS); 0 or undefined: no limit. Past it the process exits
   * EXIT_DRAIN_TIMEOUT, and its jobs still in flight stall: BullMQ gives them to another worker once
   * their lock lapses. With Redis down, nothing could be handed back, and a drain would never end.
   */
  drainMs?: number;
}

/** Pure: how a stop ended: 'stopped', 'failed', or 'timeout' when the drain deadline came first. */
export type StopOutcome = { kind: 'stopped' } | { kind: 'failed'; err: unknown } | { kind: 'timeout' };

/** Runs `stop`, bounded by `drainMs` (0: unbounded). */
export function stopWithin(stop: () => Promise<void>, drainMs: number): Promise<StopOutcome> {
  const stopped = stop().then(
    (): StopOutcome => ({ kind: 'stopped' }),
    (err: unknown): StopOutcome => ({ kind: 'failed', err }),
  );
  if (!(drainMs > 0)) return stopped;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<StopOutcome>((resolve) => {
    // not unref'd: a drain that waits on nothing alive must still end by the deadline, not exit 0
    timer = setTimeout(() => resolve({ kind: 'timeout' }), drainMs);
  });
  return Promise.race([stopped, deadline]).finally(() => clearTimeout(timer));
}

/**
 * On the first SIGINT or SIGTERM, runs `stop` (finish or hand back in-flight jobs) and exits with
 * `exitCode`; past the drain deadline it exits EXIT_DRAIN_TIMEOUT; a second signal exits at once.
 */
export function onShutdownSignal(log: Logger, stop: (signal: string) => Promise<void>, options: ShutdownOptions = {}): void {
  const exitCode = options.exitCode ?? (() => 0);
  const drainMs = options.drainMs ?? 0;
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(130);
    }
    stopping = true;
    log.info({ signal, ...(drainMs > 0 ? { drainMs } : {}) }, 'stopping: finishing in-flight jobs');
    void stopWithin(() => stop(signal), drainMs).then((outcome) => {
      if (outcome.kind === 'stopped') process.exit(exitCode(signal));
      if (outcome.kind === 'failed') log.error({ err: outcome.err }, 'error while stopping');
      else log.error({ signal, drainMs }, 'drain deadline passed (SHUTDOWN_DRAIN_MS): exiting with jobs still in flight; they run again elsewhere once their lock lapses');
      process.exit(outcome.kind === 'failed' ? 1 : EXIT_DRAIN_TIMEOUT);
    });
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}
