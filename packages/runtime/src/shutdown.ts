import type { Logger } from '@crawlfleet/core';

/**
 * On the first SIGINT or SIGTERM, runs `stop` (finish or hand back in-flight jobs) and exits with
 * `exitCode`; a second signal exits at once.
 */
export function onShutdownSignal(log: Logger, stop: (signal: string) => Promise<void>, exitCode: (signal: string) => number = () => 0): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(130);
    }
    stopping = true;
    log.info({ signal }, 'stopping: finishing in-flight jobs');
    stop(signal).then(
      () => process.exit(exitCode(signal)),
      (err: unknown) => {
        log.error({ err }, 'error while stopping');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}
