import { pino, type Logger } from 'pino';
import { redactUrl, redactDeep } from './redact.js';

export type { Logger };

/**
 * JSON lines on stderr (stdout stays free for `--json` output). Every string that holds a URL
 * with credentials is redacted before it is written.
 */
export function createLogger(options: { level?: string; name?: string } = {}): Logger {
  const logger = pino(
    {
      name: options.name ?? 'crawlfleet',
      level: options.level ?? process.env.LOG_LEVEL ?? 'info',
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      hooks: {
        logMethod(args, method) {
          // `log.error(err, msg)`: pino would serialize the Error under `err`; redacting it first turns
          // it into a plain object, so it is put under `err` here, its message the default msg.
          const [first, ...more] = args as unknown[];
          const lead = first instanceof Error ? [{ err: first }, ...(more.length ? [] : [first.message])] : [first];
          method.apply(this, [...lead, ...more].map((a) => (typeof a === 'string' ? redactUrl(a) : redactDeep(a))) as Parameters<typeof method>);
        },
      },
      formatters: { level: (label) => ({ level: label }) },
      serializers: { err: (err: Error) => redactDeep(err instanceof Error ? pino.stdSerializers.err(err) : err) },
    },
    pino.destination({ fd: 2, sync: true }),
  );
  // A child's bindings (`log.child({ proxy })`) are serialized once, without logMethod: redact them
  // on the way in. Children are created from their parent's prototype, so they inherit this too.
  const bindChild = logger.child;
  logger.child = function child(this: Logger, bindings, options) {
    return bindChild.call(this, redactDeep(bindings), options);
  } as Logger['child'];
  return logger;
}
