import { pino, type Logger } from 'pino';
import { redactUrl, redactDeep } from './redact.js';

export type { Logger };

/**
 * JSON lines on stderr (stdout stays free for `--json` output). Every string that holds a URL
 * with credentials is redacted before it is written.
 */
export function createLogger(options: { level?: string; name?: string } = {}): Logger {
  return pino(
    {
      name: options.name ?? 'crawlfleet',
      level: options.level ?? process.env.LOG_LEVEL ?? 'info',
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      hooks: {
        logMethod(args, method) {
          method.apply(this, args.map((a) => (typeof a === 'string' ? redactUrl(a) : redactDeep(a))) as Parameters<typeof method>);
        },
      },
      formatters: { level: (label) => ({ level: label }) },
      serializers: { err: (err: Error) => redactDeep(pino.stdSerializers.err(err)) },
    },
    pino.destination({ fd: 2, sync: true }),
  );
}
