import { isIP } from 'node:net';
import { z } from 'zod';

/** A string that must compile as a JavaScript regular expression. */
const regex = z.string().superRefine((value, ctx) => {
  try {
    new RegExp(value);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `invalid regular expression: ${(err as Error).message}` });
  }
});

const regexList = z.array(regex);

const hostPattern = z
  .string()
  .regex(/^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9a-fA-F:]+\](:\d{1,5})?$/, 'must be "host" or "host:port"');

const httpUrl = z.string().superRefine((value, ctx) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: `not a valid URL: ${JSON.stringify(value)}` });
    return;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    ctx.addIssue({ code: 'custom', message: `only http and https URLs are crawled, got ${url.protocol}` });
  }
});

/** An IP address or a CIDR range ("10.1.0.0/16", "127.0.0.1", "fd00::/8"). */
const addressRange = z.string().refine((value) => {
  const [address, bits, extra] = value.split('/');
  const family = isIP(address ?? '');
  if (family === 0 || extra !== undefined) return false;
  return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128));
}, 'must be an IP address or a CIDR range such as "10.1.0.0/16"');

export const fieldRuleSchema = z.strictObject({
  css: z.string().min(1, 'css must not be empty'),
  attr: z.string().min(1).optional(),
  all: z.boolean().optional(),
  regex: regex.optional(),
  type: z.enum(['string', 'number', 'integer', 'boolean']).optional(),
  absolute: z.boolean().optional(),
  required: z.boolean().optional(),
});

export const itemRuleSchema = z
  .strictObject({
    type: z.string().regex(/^[A-Za-z][A-Za-z0-9_-]*$/, 'must start with a letter; letters, digits, "_" and "-"'),
    match: regex.optional(),
    each: z.string().min(1).optional(),
    key: z.string().min(1).optional(),
    fields: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'field names are identifiers'), fieldRuleSchema),
  })
  .superRefine((rule, ctx) => {
    const key = rule.key ?? 'url';
    if (key !== 'url' && !(key in rule.fields)) {
      ctx.addIssue({ code: 'custom', path: ['key'], message: `key "${key}" is not one of the fields` });
    }
    for (const reserved of ['type', 'url', 'spider', 'crawlId', 'fetchedAt']) {
      if (reserved in rule.fields) {
        ctx.addIssue({ code: 'custom', path: ['fields', reserved], message: `"${reserved}" is set on every item and cannot be a field` });
      }
    }
  });

export const followRuleSchema = z.strictObject({
  css: z.string().min(1, 'css must not be empty'),
  attr: z.string().min(1).optional(),
  allow: regexList.optional(),
  deny: regexList.optional(),
});

const hostPolitenessSchema = z.strictObject({
  concurrencyPerHost: z.int().min(1).optional(),
  delayPerHost: z.number().min(0).optional(),
  randomizeDelay: z.boolean().optional(),
});

export const politenessSchema = z.strictObject({
  concurrencyPerHost: z.int().min(1).default(8),
  delayPerHost: z.number().min(0).default(0),
  randomizeDelay: z.boolean().default(false),
  autoThrottle: z
    .strictObject({
      enabled: z.boolean().default(false),
      targetConcurrency: z.number().positive().default(16),
      maxDelay: z.number().min(0).default(5000),
    })
    .prefault({}),
});

/** The longest Retry-After the fleet obeys (an extension of the contract): a longer one is capped. */
export const DEFAULT_MAX_RETRY_AFTER_MS = 5 * 60_000;

export const retrySchema = z.strictObject({
  attempts: z.int().min(0).max(50).default(3),
  statusCodes: z.array(z.int().min(100).max(599)).default([429, 500, 502, 503, 504, 522, 524]),
  maxRetryAfterMs: z.int().min(0).max(24 * 3600_000).default(DEFAULT_MAX_RETRY_AFTER_MS),
});

export const proxySettingsSchema = z.strictObject({
  strategy: z.enum(['weighted', 'random', 'round_robin']).default('weighted'),
  ratePerProxy: z.number().min(0).default(0),
  burstPerProxy: z.int().min(1).default(1),
  banAfterFailures: z.int().min(1).default(10),
  /**
   * the proxy resolves host names (a geo proxy): outside the SSRF guard, which then checks only IP
   * literals and localhost (an extension of the contract; off: the fleet resolves and vets the name
   * and the proxy is asked for the vetted IP)
   */
  resolveNames: z.boolean().default(false),
});

export const DEFAULT_BLOCK_PATTERNS = ['captcha', 'unusual traffic', 'access denied', 'automated queries'];
/** The longest real block page modelled in test/fixtures/blocks has about 1,000 characters of text. */
export const DEFAULT_BLOCK_PAGE_MAX_CHARS = 2000;

/** Limits that protect the fetcher from hostile servers; an extension of the contract. */
export const limitsSchema = z.strictObject({
  maxResponseBytes: z.int().min(1024).default(10 * 1024 * 1024),
  timeoutMs: z.int().min(100).default(30_000),
  maxRedirects: z.int().min(0).max(50).default(10),
  /** links a page may add to the frontier; the rest are counted skipped */
  maxLinksPerPage: z.int().min(0).default(10_000),
});

export const spiderSchema = z.strictObject({
  $schema: z.string().optional().meta({ description: 'the JSON Schema this file follows (for editors); ignored by crawlfleet' }),
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, 'letters, digits, "_", "." and "-", starting with a letter or digit'),
  startUrls: z.array(httpUrl).default([]),
  allowedDomains: z.array(hostPattern).optional(),
  maxDepth: z.int().min(0).optional(),
  maxPages: z.int().min(1).optional(),
  obeyRobotsTxt: z.boolean().default(true),
  allowPrivateAddresses: z.boolean().default(false),
  /** private ranges the SSRF guard lets through although allowPrivateAddresses is off (an extension of the contract) */
  allowedAddresses: z.array(addressRange).default([]),
  follow: z.array(followRuleSchema).default([]),
  items: z.array(itemRuleSchema).default([]),
  /** the key field of item types a code spider's hooks produce (an extension of the contract; rules name theirs with `key`) */
  itemKeys: z.record(z.string().regex(/^[A-Za-z][A-Za-z0-9_-]*$/, 'item types start with a letter; letters, digits, "_" and "-"'), z.string().min(1)).default({}),
  politeness: politenessSchema.prefault({}),
  hosts: z.record(z.string().min(1), hostPolitenessSchema).default({}),
  retry: retrySchema.prefault({}),
  proxies: proxySettingsSchema.prefault({}),
  blockPatterns: z.array(z.string().min(1)).default(DEFAULT_BLOCK_PATTERNS),
  /** a 2xx body shorter than this is a block (an extension of the contract; 1 = only an empty body) */
  blockMinBytes: z.int().min(0).default(1),
  /**
   * a page is short enough to be a block page when its visible text has at most this many characters
   * (an extension of the contract): block patterns and markers count on short pages only
   */
  blockPageMaxChars: z.int().min(0).default(DEFAULT_BLOCK_PAGE_MAX_CHARS),
  /** recognise vendors' block and challenge pages by their own markup (an extension of the contract) */
  blockMarkers: z.boolean().default(true),
  userAgents: z.array(z.string().min(1)).optional(),
  sitemapUrls: z.array(httpUrl).optional(),
  limits: limitsSchema.prefault({}),
});

/** What a user writes. */
export type SpiderInput = z.input<typeof spiderSchema>;
/** What the code reads: every default filled in. */
export type Spider = z.output<typeof spiderSchema>;
export type ItemRule = Spider['items'][number];
export type FieldRule = ItemRule['fields'][string];
export type FollowRule = Spider['follow'][number];

/** The key field of each item type (`url` by default), for sinks that deduplicate or upsert by key. */
export function itemKeyFields(spider: Spider): Record<string, string> {
  return { ...spider.itemKeys, ...Object.fromEntries(spider.items.map((r) => [r.type, r.key ?? 'url'])) };
}
