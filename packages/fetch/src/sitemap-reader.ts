import { Readable, pipeline } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { Parser } from 'htmlparser2';
import { NonRetryableError } from '@crawlfleet/core';

/** The sitemaps protocol's own limits: 50,000 URLs and 50 MB (uncompressed) per file. */
export const SITEMAP_MAX_BYTES = 50 * 1024 * 1024;

/** What a sitemap lists: another sitemap (an index's child, a robots.txt's `Sitemap:` line), or a page URL. */
export type SitemapItem = { kind: 'sitemap'; url: string } | { kind: 'url'; url: string; lastmod?: string };

/** A `<loc>`, `<lastmod>` or text line longer than this is not a URL (the protocol allows 2,048 characters). */
const MAX_FIELD_CHARS = 8192;
/** Text is decoded and parsed this many bytes at a time, so a big file never becomes one string. */
const SLICE_BYTES = 64 * 1024;

function sitemapError(url: string, problem: string, cause?: unknown): NonRetryableError {
  return new NonRetryableError('ERR_SITEMAP', `${url}: ${problem}`, { url }, cause === undefined ? undefined : { cause });
}

/** A buffer as slices of at most `size` bytes (views, not copies). */
export function* slices(body: Buffer, size = SLICE_BYTES): Generator<Buffer> {
  for (let i = 0; i < body.length; i += size) yield body.subarray(i, i + size);
}

/** The bytes of a sitemap as served: gunzipped when they are gzip (a `.xml.gz` file), streamed either way. */
async function* gunzipped(body: AsyncIterable<Buffer> | Iterable<Buffer>): AsyncGenerator<Buffer> {
  const it = (Symbol.asyncIterator in body ? body[Symbol.asyncIterator]() : body[Symbol.iterator]()) as AsyncIterator<Buffer> | Iterator<Buffer>;
  let head = Buffer.alloc(0);
  let ended = false;
  while (head.length < 2 && !ended) {
    const next = await it.next();
    if (next.done) ended = true;
    else head = Buffer.concat([head, next.value]);
  }
  async function* all(): AsyncGenerator<Buffer> {
    if (head.length > 0) yield head;
    while (!ended) {
      const next = await it.next();
      if (next.done) return;
      yield next.value;
    }
  }
  if (head[0] !== 0x1f || head[1] !== 0x8b) return yield* all();
  const gunzip = createGunzip();
  // An error on either side destroys the gunzip stream, and its iteration below throws it.
  pipeline(Readable.from(all()), gunzip, () => undefined);
  yield* gunzip as AsyncIterable<Buffer>;
}

/** Pure: a sitemap's UTF-8 text, a slice at a time, at most `maxBytes` of it once gunzipped. */
async function* sitemapText(body: AsyncIterable<Buffer> | Iterable<Buffer>, url: string, maxBytes: number): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8');
  let total = 0;
  try {
    for await (const chunk of gunzipped(body)) {
      total += chunk.length;
      if (total > maxBytes) throw sitemapError(url, `larger than ${maxBytes} bytes uncompressed (the sitemaps protocol allows 50 MB)`);
      for (const slice of slices(chunk)) yield decoder.decode(slice, { stream: true });
    }
  } catch (err) {
    if (err instanceof NonRetryableError) throw err;
    throw sitemapError(url, `cannot be read: ${(err as Error).message}`, err);
  }
  yield decoder.decode();
}

/**
 * Pure: W3C Datetime (a sitemap's `<lastmod>`: `2024-05-01`, `2024-05-01T10:00:00+02:00`, ...) as an
 * ISO 8601 instant in UTC, to the second; undefined when it is not one. A time without a zone is read
 * as UTC, and a zone written `+0200` as `+02:00`: both are common in the wild.
 */
export function sitemapLastmod(text: string): string | undefined {
  const m = /^(\d{4}(?:-\d{2}(?:-\d{2})?)?)(?:[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)\s*(Z|[+-]\d{2}:?\d{2})?)?$/i.exec(text.trim());
  if (!m) return undefined;
  const [, date, time, zone] = m;
  const iso = time ? `${date}T${time}${zone ? (zone.length === 5 ? `${zone.slice(0, 3)}:${zone.slice(3)}` : zone.toUpperCase()) : 'Z'}` : date!;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? undefined : new Date(Math.floor(ms / 1000) * 1000).toISOString();
}

/** Pushes the items of an XML sitemap (a `<sitemapindex>` or a `<urlset>`) as its text arrives. */
function xmlReader(url: string, emit: (item: SitemapItem) => void): { write(text: string): void; end(): void } {
  let depth = 0;
  let root: 'index' | 'urlset' | undefined;
  let entry: { loc?: string; lastmod?: string } | undefined;
  let field: 'loc' | 'lastmod' | undefined;
  let text = '';
  const parser = new Parser(
    {
      onopentag(name) {
        depth++;
        if (depth === 1) {
          if (name === 'sitemapindex') root = 'index';
          else if (name === 'urlset') root = 'urlset';
          else throw sitemapError(url, `is neither a sitemap index, a urlset nor a text sitemap (its root element is <${name}>)`);
        } else if (depth === 2 && name === (root === 'index' ? 'sitemap' : 'url')) entry = {};
        else if (depth === 3 && entry && (name === 'loc' || (name === 'lastmod' && root === 'urlset'))) {
          field = name;
          text = '';
        }
      },
      ontext(data) {
        if (field && text.length <= MAX_FIELD_CHARS) text += data;
      },
      onclosetag() {
        if (depth === 3 && entry && field) {
          if (text.length <= MAX_FIELD_CHARS) entry[field] = text.trim();
          field = undefined;
        } else if (depth === 2 && entry) {
          const { loc, lastmod } = entry;
          entry = undefined;
          if (loc && root === 'index') emit({ kind: 'sitemap', url: loc });
          else if (loc) {
            const when = lastmod ? sitemapLastmod(lastmod) : undefined;
            emit({ kind: 'url', url: loc, ...(when ? { lastmod: when } : {}) });
          }
        }
        depth--;
      },
    },
    { xmlMode: true },
  );
  return {
    write: (t) => parser.write(t),
    end() {
      parser.end();
      if (!root) throw sitemapError(url, 'is neither a sitemap index, a urlset nor a text sitemap (it has no root element)');
    },
  };
}

/**
 * Pushes the items of a text file, a line at a time: a robots.txt's `Sitemap:` lines, or a text
 * sitemap's URLs (one per line, UTF-8, as sitemaps.org allows). A text sitemap whose first line is
 * not an http(s) URL is not one; later lines that are not URLs are passed over.
 */
function lineReader(url: string, robots: boolean, emit: (item: SitemapItem) => void): { write(text: string): void; end(): void } {
  let partial = '';
  let first = true;
  const line = (raw: string) => {
    const trimmed = raw.trim();
    if (robots) {
      const m = /^sitemap\s*:\s*(\S+)/i.exec(trimmed);
      if (m) emit({ kind: 'sitemap', url: m[1]! });
      return;
    }
    if (trimmed === '') return;
    const isUrl = trimmed.length <= MAX_FIELD_CHARS && /^https?:\/\/\S+$/i.test(trimmed);
    if (first && !isUrl) throw sitemapError(url, 'is neither a sitemap index, a urlset nor a text sitemap (its first line is not an http(s) URL)');
    first = false;
    if (isUrl) emit({ kind: 'url', url: trimmed });
  };
  return {
    write(text) {
      const lines = (partial + text).split('\n');
      partial = lines.pop()!;
      for (const l of lines) line(l);
      // A line longer than any URL is not one: it is not held whole.
      if (partial.length > MAX_FIELD_CHARS) partial = partial.slice(-MAX_FIELD_CHARS);
    },
    end() {
      line(partial);
      if (first && !robots) throw sitemapError(url, 'is empty');
    },
  };
}

/**
 * Streams what a sitemap lists, in order, without holding it whole: gzip or not, an XML sitemap
 * index or urlset (parsed as a stream), a text sitemap (one URL per line), or the `Sitemap:` lines of
 * a robots.txt (by its path). A `<url>`'s `<lastmod>` comes along when it is a valid date. More than
 * `maxBytes` once gunzipped, or a file that is none of these, is an ERR_SITEMAP naming it.
 */
export async function* readSitemap(body: AsyncIterable<Buffer> | Iterable<Buffer>, url: string, maxBytes = SITEMAP_MAX_BYTES): AsyncGenerator<SitemapItem> {
  const robots = new URL(url).pathname === '/robots.txt';
  const items: SitemapItem[] = [];
  const emit = (item: SitemapItem) => items.push(item);
  let reader: ReturnType<typeof xmlReader> | undefined;
  for await (const text of sitemapText(body, url, maxBytes)) {
    if (!reader) {
      const start = text.trimStart();
      if (start === '') continue;
      reader = !robots && start.startsWith('<') ? xmlReader(url, emit) : lineReader(url, robots, emit);
      reader.write(start);
    } else reader.write(text);
    yield* items.splice(0);
  }
  if (!reader) {
    if (robots) return;
    throw sitemapError(url, 'is empty');
  }
  reader.end();
  yield* items.splice(0);
}
