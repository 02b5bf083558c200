import { ConfigError, ServiceUnavailableError } from '@crawlfleet/core/light';

/** CONTRACT.md: 0 success, 1 runtime failure, 2 bad usage or configuration, 124 timeout. */
export const EXIT = { ok: 0, failure: 1, usage: 2, timeout: 124, interrupted: 130 } as const;

export class ExitError extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
  }
}

export function exitCodeFor(err: unknown): number {
  if (err instanceof ExitError) return err.exitCode;
  if (err instanceof ConfigError) return EXIT.usage;
  if (err instanceof ServiceUnavailableError) return EXIT.failure;
  const code = (err as { code?: string }).code;
  if (typeof code === 'string' && code.startsWith('commander.')) return code === 'commander.helpDisplayed' || code === 'commander.version' || code === 'commander.help' ? EXIT.ok : EXIT.usage;
  return EXIT.failure;
}
