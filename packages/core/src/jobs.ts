import { z } from 'zod';
import { CRAWL_ID_PATTERN, type Stage } from './keys.js';

/** Job payloads of the three queues. A job that fails its schema is poison: dead-lettered, never run. */
const crawlId = z.string().regex(CRAWL_ID_PATTERN, 'not a valid crawl id');

/** The longest link metadata a code spider may attach: it travels in the frontier and in two jobs. */
export const MAX_LINK_META_BYTES = 4096;
const linkMeta = z.record(z.string(), z.unknown()).refine((m) => Buffer.byteLength(JSON.stringify(m)) <= MAX_LINK_META_BYTES, `at most ${MAX_LINK_META_BYTES} bytes of JSON`);

/**
 * What the last visit of a URL learnt, for a recrawl: its validators (sent as If-None-Match and
 * If-Modified-Since), the hash of its body, when it last changed, and its recrawl interval.
 */
export const knownPageSchema = z.strictObject({
  etag: z.string().max(1024).optional(),
  lastModified: z.string().max(256).optional(),
  hash: z.string().regex(/^[0-9a-f]{40}$/),
  changedAt: z.iso.datetime(),
  intervalS: z.int().min(1),
});

/** A URL's record in the crawl's pages store (a spider with `recrawl`), written by the writers after each visit. */
export const pageRecordSchema = z.strictObject({
  url: z.url(),
  depth: z.int().min(0),
  status: z.int().min(100).max(599),
  etag: z.string().max(1024).optional(),
  lastModified: z.string().max(256).optional(),
  /** SHA-1 of the body, its Content-Encoding undone */
  hash: z.string().regex(/^[0-9a-f]{40}$/),
  /** the last visit (a 304 too) */
  lastSeenAt: z.iso.datetime(),
  /** the first visit that saw this body */
  changedAt: z.iso.datetime(),
  intervalS: z.int().min(1),
  /** when a recrawl with --due takes the URL again */
  dueAt: z.iso.datetime(),
  /** the sitemap's `<lastmod>` when it listed the URL */
  lastmod: z.iso.datetime().optional(),
});

export const fetchJobSchema = z.strictObject({
  crawlId,
  url: z.url({ protocol: /^https?$/ }),
  depth: z.int().min(0),
  referer: z.string().optional(),
  /** redirects that led to this URL: a chain longer than limits.maxRedirects ends in the dead-letter set */
  redirects: z.int().min(1).max(50).optional(),
  /** proxies this URL was blocked through: its retries go through others */
  avoidProxies: z
    .array(z.string().regex(/^[0-9a-f]{12}$/))
    .max(64)
    .optional(),
  /** what the code spider's link to this URL carried, for its hooks */
  meta: linkMeta.optional(),
  /** when the page last changed, as the sitemap that listed it says (its `<lastmod>`), for later stages and recrawls */
  lastmod: z.iso.datetime().optional(),
  /** a recrawl: what the last visit learnt, for a conditional request */
  known: knownPageSchema.optional(),
});

/**
 * A fetched exchange as on the wire, for a crawl with WARC output: it travels with the page to the
 * writers, which archive it (request, response or revisit, and metadata with the page's outlinks).
 */
export const wireCaptureSchema = z.strictObject({
  /** the URL the response is for (after same-origin redirects followed inside the request) */
  targetUri: z.url(),
  /** when the response was received */
  date: z.iso.datetime(),
  requestHead: z.string(),
  responseHead: z.string(),
  /** the body before any Content-Encoding was undone, compressed (body-codec), base64 */
  body: z.string(),
  ip: z.string().optional(),
  /** the links the parser found on the page (the metadata record) */
  outlinks: z.array(z.string()).optional(),
});

export const parseJobSchema = z.strictObject({
  crawlId,
  url: z.url(),
  finalUrl: z.url(),
  depth: z.int().min(0),
  status: z.int().min(100).max(599),
  contentType: z.string(),
  fetchedAt: z.iso.datetime(),
  /** the response body, compressed (body-codec), base64 */
  body: z.string(),
  /** a code spider's page: the response headers and the link's metadata, for its parse hook */
  headers: z.record(z.string(), z.string()).optional(),
  meta: linkMeta.optional(),
  capture: wireCaptureSchema.optional(),
  /** the URL's record after this visit (a spider with `recrawl`), for the writers */
  page: pageRecordSchema.optional(),
});

export const itemSchema = z.record(z.string(), z.unknown());

export const writeJobSchema = z
  .strictObject({
    crawlId,
    url: z.url(),
    items: z.array(itemSchema),
    capture: wireCaptureSchema.optional(),
    page: pageRecordSchema.optional(),
  })
  .refine((job) => job.items.length > 0 || job.capture !== undefined || job.page !== undefined, { message: 'a write job carries items, an exchange to archive or a page record', path: ['items'] });

export type FetchJob = z.infer<typeof fetchJobSchema>;
export type ParseJob = z.infer<typeof parseJobSchema>;
export type WriteJob = z.infer<typeof writeJobSchema>;
export type WireCapture = z.infer<typeof wireCaptureSchema>;
export type KnownPage = z.infer<typeof knownPageSchema>;
export type PageRecord = z.infer<typeof pageRecordSchema>;
export type Item = z.infer<typeof itemSchema>;

export interface JobByStage {
  fetch: FetchJob;
  parse: ParseJob;
  write: WriteJob;
}

export const JOB_SCHEMAS: { [S in Stage]: z.ZodType<JobByStage[S]> } = {
  fetch: fetchJobSchema,
  parse: parseJobSchema,
  write: writeJobSchema,
};

/** Validates a job payload; returns the problem as one line when it is invalid. */
export function validateJob<S extends Stage>(stage: S, data: unknown): { ok: true; job: JobByStage[S] } | { ok: false; reason: string } {
  const result = JOB_SCHEMAS[stage].safeParse(data);
  if (result.success) return { ok: true, job: result.data };
  const reason = result.error.issues.map((i) => `${i.path.join('.') || '(payload)'}: ${i.message}`).join('; ');
  return { ok: false, reason: `invalid ${stage} job: ${reason}` };
}
