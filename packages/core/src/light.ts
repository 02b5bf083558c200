/**
 * The part of core that loads nothing heavy (no Redis client, no BullMQ, no zod): errors, credential
 * redaction, crawl ids and durations. The CLI's entry point imports only this, so `--version`, `--help` and
 * every command start without paying for what they do not use.
 */
export * from './errors.js';
export * from './redact.js';
export { CRAWL_ID_PATTERN, assertCrawlId } from './keys.js';
export { DURATION_EXAMPLES, parseDuration } from './duration.js';
