import { isIP } from 'node:net';
import { z } from 'zod';
import { jsonPathProblem } from './json-path.js';

/** A string that must compile as a JavaScript regular expression. */
const regex = z.string().superRefine((value, ctx) => {
  try {
    new RegExp(value);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `invalid regular expression: ${(err as Error).message}` });
  }
});

const regexList = z.array(regex);

const hostPattern = z.string().regex(/^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9a-fA-F:]+\](:\d{1,5})?$/, 'must be "host" or "host:port"');

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

/** A JSON path (see json-path.ts): `a.b`, `items[0]`, `tags[*]`, `["odd key"]`, `$`. */
const jsonPath = z.string().superRefine((value, ctx) => {
  const problem = jsonPathProblem(value);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
});

export const fieldRuleSchema = z
  .strictObject({
    /** a CSS selector, for HTML pages */
    css: z.string().min(1, 'css must not be empty').optional(),
    /** a JSON path relative to the item's scope, for JSON pages */
    json: jsonPath.optional(),
    attr: z.string().min(1).optional(),
    all: z.boolean().optional(),
    regex: regex.optional(),
    type: z.enum(['string', 'number', 'integer', 'boolean']).optional(),
    absolute: z.boolean().optional(),
    required: z.boolean().optional(),
  })
  .superRefine((field, ctx) => {
    if ((field.css === undefined) === (field.json === undefined)) ctx.addIssue({ code: 'custom', message: 'a field needs exactly one of css or json' });
    if (field.json !== undefined && field.attr !== undefined) ctx.addIssue({ code: 'custom', path: ['attr'], message: 'attr applies to css fields only' });
  });

type FieldKind = 'css' | 'json';

/** A field's kind; undefined when it has both or neither (an error of its own). */
function fieldKind(field: { css?: string | undefined; json?: string | undefined }): FieldKind | undefined {
  if ((field.css === undefined) === (field.json === undefined)) return undefined;
  return field.css !== undefined ? 'css' : 'json';
}

export const itemRuleSchema = z
  .strictObject({
    type: z.string().regex(/^[A-Za-z][A-Za-z0-9_-]*$/, 'must start with a letter; letters, digits, "_" and "-"'),
    match: regex.optional(),
    /** one item per element this CSS selector matches (css fields) */
    each: z.string().min(1).optional(),
    /** one item per element of the array this JSON path selects (json fields) */
    eachJson: jsonPath.optional(),
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
    if (rule.each !== undefined && rule.eachJson !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['eachJson'], message: 'a rule has each (css) or eachJson (json), not both' });
    }
    const kinds = Object.entries(rule.fields).flatMap(([name, field]) => {
      const kind = fieldKind(field);
      return kind ? [{ name, kind }] : [];
    });
    const first = kinds[0];
    for (const { name, kind } of kinds) {
      if (first && kind !== first.kind) {
        ctx.addIssue({ code: 'custom', path: ['fields', name], message: `a rule's fields are all css or all json: "${first.name}" uses ${first.kind}, "${name}" uses ${kind}` });
      }
    }
    const json = kinds.find((k) => k.kind === 'json');
    const css = kinds.find((k) => k.kind === 'css');
    if (rule.each !== undefined && json) {
      ctx.addIssue({ code: 'custom', path: ['each'], message: `each is a CSS selector and needs css fields, but "${json.name}" uses json (use eachJson)` });
    }
    if (rule.eachJson !== undefined && css) {
      ctx.addIssue({ code: 'custom', path: ['eachJson'], message: `eachJson needs json fields, but "${css.name}" uses css (use each)` });
    }
  });

export const followRuleSchema = z
  .strictObject({
    /** a CSS selector, for HTML pages: each element's `attr` (default href) is a link */
    css: z.string().min(1, 'css must not be empty').optional(),
    /** a JSON path, for JSON pages: each string or number it selects is a link */
    json: jsonPath.optional(),
    attr: z.string().min(1).optional(),
    /** json only: a URL with one `{}`, which receives each value URL-encoded */
    format: z
      .string()
      .refine((value) => value.split('{}').length === 2, 'format needs exactly one "{}" placeholder')
      .optional(),
    allow: regexList.optional(),
    deny: regexList.optional(),
  })
  .superRefine((rule, ctx) => {
    if ((rule.css === undefined) === (rule.json === undefined)) ctx.addIssue({ code: 'custom', message: 'a follow rule needs exactly one of css or json' });
    if (rule.json !== undefined && rule.attr !== undefined) ctx.addIssue({ code: 'custom', path: ['attr'], message: 'attr applies to css follow rules only' });
    if (rule.css !== undefined && rule.format !== undefined) ctx.addIssue({ code: 'custom', path: ['format'], message: 'format applies to json follow rules only' });
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
  maxRetryAfterMs: z
    .int()
    .min(0)
    .max(24 * 3600_000)
    .default(DEFAULT_MAX_RETRY_AFTER_MS),
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

/**
 * Sessions (an extension of the contract, issue #30): a host's requests go as one identity (a proxy,
 * a User-Agent and its headers, a cookie jar) for many requests, shared by the whole fleet through
 * Redis, as one person would be seen; a block retires the session. Bounded per host, by age and by uses.
 */
export const sessionsSchema = z.strictObject({
  enabled: z.boolean().default(true),
  /** sessions alive at once per host, across all proxies */
  maxPerHost: z.int().min(1).max(1000).default(8),
  /** a session retires this long after it began */
  maxAgeMs: z
    .int()
    .min(1000)
    .max(7 * 24 * 3600_000)
    .default(30 * 60_000),
  /** a session retires after this many requests */
  maxUses: z.int().min(1).max(1_000_000).default(100),
});

export const DEFAULT_BLOCK_PATTERNS = ['captcha', 'unusual traffic', 'access denied', 'automated queries'];
/** The longest real block page modelled in test/fixtures/blocks has about 1,000 characters of text. */
export const DEFAULT_BLOCK_PAGE_MAX_CHARS = 2000;

/**
 * Sitemap bounds (issue #19): robots.txt -> index -> sitemap is 2 levels, an index of indexes 3, so 5
 * leaves room and stops a chain of sitemaps (or robots.txt files) listing the next one after 6 files.
 */
export const DEFAULT_MAX_SITEMAP_DEPTH = 5;
/** 10,000 files: 10 million URLs in sitemaps of 1,000 (a common size), and a runaway stops there. */
export const DEFAULT_MAX_SITEMAP_FILES = 10_000;
/** 10 million URLs: 200 full sitemaps (50,000 URLs each), more than a crawl's frontier is sized for on one Redis. */
export const DEFAULT_MAX_SITEMAP_URLS = 10_000_000;

/** Limits that protect the fetcher from hostile servers; an extension of the contract. */
export const limitsSchema = z.strictObject({
  maxResponseBytes: z
    .int()
    .min(1024)
    .default(10 * 1024 * 1024),
  timeoutMs: z.int().min(100).default(30_000),
  maxRedirects: z.int().min(0).max(50).default(10),
  /** links a page may add to the frontier; the rest are counted skipped */
  maxLinksPerPage: z.int().min(0).default(10_000),
  /**
   * URLs of one host (its hostname) the crawl admits, against crawler traps (calendars, session ids
   * in paths); the host's later URLs are counted skipped. Unlimited when absent.
   */
  maxPagesPerHost: z.int().min(1).optional(),
  /**
   * levels of sitemaps read below a sitemap source: a sitemap index's child, and a robots.txt's
   * `Sitemap:` line, is one level deeper. A sitemap listed deeper is not read and counted skipped.
   */
  maxSitemapDepth: z.int().min(0).max(100).default(DEFAULT_MAX_SITEMAP_DEPTH),
  /** sitemap files (and robots.txt files listing sitemaps) read for one seeding; the rest are counted skipped */
  maxSitemapFiles: z.int().min(1).default(DEFAULT_MAX_SITEMAP_FILES),
  /** page URLs taken from sitemaps for one seeding; the rest of the file being read, and each sitemap left unread, are counted skipped */
  maxSitemapUrls: z.int().min(1).default(DEFAULT_MAX_SITEMAP_URLS),
});

/**
 * Recrawls (an extension of the contract): with this set, the writers keep each fetched URL's record
 * (validators, body hash, when it changed, when it is due) in the sink's pages store, and `recrawl`
 * fetches the known URLs again with conditional requests. A URL's interval halves when it changed
 * and doubles when it did not, within the bounds.
 */
export const recrawlSchema = z
  .strictObject({
    intervalHours: z.number().positive().default(24),
    minIntervalHours: z.number().positive().default(1),
    maxIntervalHours: z
      .number()
      .positive()
      .default(30 * 24),
  })
  .refine((r) => r.minIntervalHours <= r.intervalHours && r.intervalHours <= r.maxIntervalHours, { message: 'minIntervalHours <= intervalHours <= maxIntervalHours' });

export const RENDER_MODES = ['never', 'always', 'auto'] as const;
const renderMode = z.enum(RENDER_MODES);

/** Resource types a rendering browser does not load by default: they cost bandwidth and never build the DOM. */
export const DEFAULT_RENDER_BLOCK = ['image', 'font', 'media'];

/**
 * Rendering with a browser (an extension of the contract): which pages go to the render stage, and
 * how a page is rendered. `"never"`, `"always"` and `"auto"` are the mode alone; the object form adds
 * rules by URL (the first whose `match` matches decides) and the page settings.
 */
export const renderSchema = z.union([
  renderMode,
  z.strictObject({
    mode: renderMode.default('auto'),
    /** the first rule whose `match` (a regular expression) matches the URL sets its mode */
    rules: z.array(z.strictObject({ match: regex, mode: renderMode })).default([]),
    /** what the page is rendered until, after its load event: a selector appears, the network goes idle; `maxWaitMs` caps it */
    waitFor: z
      .strictObject({
        selector: z.string().min(1).optional(),
        networkIdle: z.boolean().default(false),
        maxWaitMs: z.int().min(0).max(120_000).default(5000),
      })
      .prefault({}),
    /** the page's navigation and its load event, at most (its wait comes after) */
    timeoutMs: z.int().min(1000).max(300_000).default(30_000),
    /** resource types the browser does not load (Playwright's: image, font, media, stylesheet, script, xhr, fetch, ...) */
    block: z.array(z.string().min(1)).default(DEFAULT_RENDER_BLOCK),
    /** requests a page may make besides its own navigation (scripts, XHR, frames); the rest are refused */
    maxRequestsPerPage: z.int().min(0).max(10_000).default(100),
  }),
]);

export const spiderSchema = z
  .strictObject({
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
    sessions: sessionsSchema.prefault({}),
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
    recrawl: recrawlSchema.optional(),
    render: renderSchema.optional(),
  })
  .superRefine((spider, ctx) => {
    for (const issue of itemKeyConflicts(spider.items, spider.itemKeys)) ctx.addIssue({ code: 'custom', ...issue });
  });

/**
 * Pure: where rules give one item type two keys. Sinks deduplicate and upsert each type by one key
 * field: with two, one rule's items would be keyed by a field they may not have (collapsing them, or
 * refusing them as invalid), depending on the order of the rules.
 */
export function itemKeyConflicts(items: readonly { type: string; key?: string | undefined }[], itemKeys: Readonly<Record<string, string>>): { path: (string | number)[]; message: string }[] {
  const first = new Map<string, { key: string; where: string }>();
  for (const [type, key] of Object.entries(itemKeys)) first.set(type, { key, where: `itemKeys.${type}` });
  const issues: { path: (string | number)[]; message: string }[] = [];
  items.forEach((rule, i) => {
    const key = rule.key ?? 'url';
    const seen = first.get(rule.type);
    if (!seen) first.set(rule.type, { key, where: `items[${i}]` });
    else if (seen.key !== key) {
      issues.push({
        path: ['items', i, 'key'],
        message: `item type "${rule.type}" is keyed by "${seen.key}" in ${seen.where}, and by "${key}" here: every rule of one type needs the same key, which its sinks deduplicate and upsert by`,
      });
    }
  });
  return issues;
}

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

/** What the spider sets for one host: its `politeness`, overridden by the host's `hosts` entry. */
export interface HostLimits {
  concurrency: number;
  /** the delay between two request starts, in ms, before robots.txt's Crawl-delay, jitter and AutoThrottle */
  delayMs: number;
  randomize: boolean;
}

/** Pure: the spider's limits for `hostname`. */
export function hostLimits(spider: Pick<Spider, 'politeness' | 'hosts'>, hostname: string): HostLimits {
  const override = spider.hosts[hostname] ?? {};
  const { politeness } = spider;
  return {
    concurrency: override.concurrencyPerHost ?? politeness.concurrencyPerHost,
    delayMs: override.delayPerHost ?? politeness.delayPerHost,
    randomize: override.randomizeDelay ?? politeness.randomizeDelay,
  };
}
