import { NonRetryableError } from '../errors.js';

/**
 * What the fleet knows of a code spider, without its types: the hooks a module may export beside
 * the declarative settings, and the reference a crawl records so every worker loads the same code.
 * The typed view for spider authors is @crawlfleet/sdk.
 */

/** The keys of a spider module that are code, not settings. */
export const CODE_KEYS = ['parse', 'request', 'item', 'schemas'] as const;
export type CodeKey = (typeof CODE_KEYS)[number];

/** A zod schema, or anything with zod's safeParse. */
export interface ItemSchema {
  safeParse(value: unknown): { success: true; data: unknown } | { success: false; error: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> } };
}

type Hook = (...args: never[]) => unknown;

/** The code of a spider module, checked for shape (functions are functions) but never run here. */
export interface SpiderCode {
  parse?: Hook;
  request?: Hook;
  item?: Hook;
  schemas?: Record<string, ItemSchema>;
}

/** Where a crawl's spider module lives and the hash of its source, recorded at seed time. */
export interface SpiderModuleRef {
  /** absolute path: every fetcher and parser loads the module from here */
  path: string;
  /** sha256 of the spider's own source files (its imports from node_modules excluded), 16 hex digits */
  hash: string;
}

/** Marks a link yielded by a parse hook (`follow(url)`); a symbol from the global registry, so every copy of the SDK agrees. */
export const FOLLOW_MARK = Symbol.for('crawlfleet.follow');
/** Marks the object defineSpider returned. */
export const SPIDER_MARK = Symbol.for('crawlfleet.spider');

export function hasCode(code: SpiderCode | undefined): code is SpiderCode {
  return code !== undefined && CODE_KEYS.some((k) => code[k] !== undefined);
}

function describeThrown(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  return err.name && err.name !== 'Error' ? `${err.name}: ${err.message}` : err.message;
}

/**
 * A spider's hook threw: the page is dead-lettered with the message and the line of the spider's
 * source it came from. Retrying would run the same code on the same page, so it is not retried.
 */
export class SpiderHookError extends NonRetryableError {
  constructor(
    readonly hook: string,
    cause: unknown,
    readonly place?: string,
  ) {
    super('ERR_SPIDER_HOOK', `${hook} hook threw${place ? ` at ${place}` : ''}: ${describeThrown(cause)}`, { hook, ...(place ? { place } : {}) }, { cause });
  }
}

/** One line for an error a hook threw where it is not fatal (an item dropped): message and place. */
export function hookFailure(hook: string, err: unknown, place: string | undefined): string {
  return `${hook} hook: ${describeThrown(err)}${place ? ` (${place})` : ''}`;
}

/**
 * A hook's work, bounded by the spider's request timeout: a hook that never settles (a promise
 * nobody resolves) would otherwise hold its worker slot for ever, its lock renewed. A hook that
 * blocks the event loop cannot be stopped this way; its job stalls and ends ERR_STALLED.
 */
export async function withinHookDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not finish within ${ms} ms (limits.timeoutMs)`)), ms);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
