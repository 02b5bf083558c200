import { extname, resolve } from 'node:path';
import { ConfigError } from './errors.js';
import { encodeUrlCredentials, splitUserInfo, stripUrlCredentials } from './redact.js';

/**
 * Where a crawl's items go; stored with the crawl so any writer on any machine can open it.
 * A MongoDB `url` is stored without its credentials (anyone who reads Redis could read them): the
 * writer takes the user and password from its own environment, matched by the server's hosts
 * (see mongoUrlForSink). `needsCredentials` says the URL given had them.
 */
export type SinkSpec = ({ kind: 'jsonl' | 'csv'; path: string } | { kind: 'mongo'; url?: string; needsCredentials?: true }) & { warc?: WarcOutput };
export type MongoSinkSpec = Extract<SinkSpec, { kind: 'mongo' }>;

/** WARC output beside the items (`--warc DIR`): every fetched page's exchange, archived. */
export interface WarcOutput {
  /** an absolute directory, shared by the writers that may write it */
  dir: string;
  /** a file is closed and the next begun once it reaches this size */
  rolloverBytes: number;
}

/** 1 GB, the size Heritrix and the WARC guidelines use. */
export const DEFAULT_WARC_ROLLOVER_BYTES = 1_000_000_000;

/** `--warc DIR [--warc-rollover BYTES]`: where a crawl's WARC files go. */
export function warcOutputFor(dir: string, rolloverBytes = DEFAULT_WARC_ROLLOVER_BYTES, cwd = process.cwd()): WarcOutput {
  if (!Number.isSafeInteger(rolloverBytes) || rolloverBytes < 1_000_000) {
    throw new ConfigError(`--warc-rollover: ${rolloverBytes} is not a size in bytes of at least 1000000`, { file: 'command line' });
  }
  return { dir: resolve(cwd, dir), rolloverBytes };
}

/** `--out FILE` / `--sink FILE|mongo`: the kind follows the file's extension. */
export function sinkSpecFor(target: string, cwd = process.cwd()): SinkSpec {
  if (target === 'mongo') return { kind: 'mongo' };
  const ext = extname(target).toLowerCase();
  if (ext === '.jsonl' || ext === '.ndjson') return { kind: 'jsonl', path: resolve(cwd, target) };
  if (ext === '.csv') return { kind: 'csv', path: resolve(cwd, target) };
  throw new ConfigError(`${target}: the output file must end in .jsonl or .csv (or use --mongo)`, { file: target });
}

export function defaultSinkSpec(crawlId: string, cwd = process.cwd()): SinkSpec {
  return { kind: 'jsonl', path: resolve(cwd, 'data', crawlId, 'items.jsonl') };
}

/** A sink with the WARC output the command line asked for (`--warc DIR`, `--warc-rollover BYTES`). */
export function withWarcOutput(spec: SinkSpec, options: { warc?: string; warcRollover?: number }): SinkSpec {
  return options.warc ? { ...spec, warc: warcOutputFor(options.warc, options.warcRollover) } : spec;
}

/** `crawl --mongo URL`: the sink as it is stored, the URL without its user and password. */
export function mongoSinkSpec(url: string): MongoSinkSpec {
  const { url: bare, hadCredentials } = stripUrlCredentials(url);
  return { kind: 'mongo', url: bare, ...(hadCredentials ? { needsCredentials: true as const } : {}) };
}

/** Pure: the form of a sink that may be written to Redis; no credentials survive it. */
export function storableSinkSpec(spec: SinkSpec): SinkSpec {
  if (spec.kind !== 'mongo' || spec.url === undefined) return spec;
  const stored = mongoSinkSpec(spec.url);
  return { ...stored, ...(spec.needsCredentials ? { needsCredentials: true as const } : {}), ...(spec.warc ? { warc: spec.warc } : {}) };
}

/**
 * Pure: which server a MongoDB URL names, for matching credentials to a sink: the scheme and its
 * hosts, lower-cased, with the default port, in order (`mongodb://b,a:27017` = `mongodb://a:27017,b`).
 */
export function mongoServerKey(url: string): string {
  const match = /^(mongodb(?:\+srv)?):\/\/(.*)$/is.exec(url.trim());
  if (!match) return url;
  const { rest } = splitUserInfo(match[2]!);
  const hosts = rest.split(/[/?#]/, 1)[0]!.toLowerCase().split(',').filter(Boolean);
  const withPort = match[1] === 'mongodb' ? hosts.map((h) => (/(^[^[:]+|\])$/.test(h) ? `${h}:27017` : h)) : hosts;
  return `${match[1]!.toLowerCase()}://${withPort.sort().join(',')}`;
}

export interface MongoCredentialSources {
  /** the writer's MONGO_URL */
  mongoUrl: string;
  /** the writer's MONGO_CREDENTIALS: more URLs with credentials, for other servers */
  mongoCredentials?: string[];
}

/**
 * Pure: the URL a writer opens for a crawl's MongoDB sink.
 * - No URL in the sink (`seed --sink mongo`, or MONGO_URL in `crawl`): the writer's MONGO_URL.
 * - A URL: the first of the writer's MONGO_URL and MONGO_CREDENTIALS naming the same server lends it
 *   its user and password. A sink that needs credentials and finds none is a configuration error of
 *   this writer, said plainly (another writer may have them).
 * - A URL still holding credentials (a crawl registered before they were stripped) is used as it is.
 */
export function mongoUrlForSink(spec: MongoSinkSpec, sources: MongoCredentialSources): string {
  if (spec.url === undefined) return encodeUrlCredentials(sources.mongoUrl);
  if (stripUrlCredentials(spec.url).hadCredentials) return encodeUrlCredentials(spec.url);
  const server = mongoServerKey(spec.url);
  const lender = [sources.mongoUrl, ...(sources.mongoCredentials ?? [])].find((u) => mongoServerKey(u) === server && stripUrlCredentials(u).hadCredentials);
  if (lender) {
    const userInfo = splitUserInfo(encodeUrlCredentials(lender).replace(/^[^:]+:\/\//, '')).userInfo!;
    return spec.url.replace(/^([^:]+:\/\/)/, `$1${userInfo}@`);
  }
  if (spec.needsCredentials) {
    throw new ConfigError(
      `the crawl's MongoDB sink ${spec.url} needs a user and password, and this writer has none for ${server}: ` +
        'give the writer MONGO_URL, or a URL in MONGO_CREDENTIALS, with the credentials for that server',
      { file: 'environment' },
    );
  }
  return spec.url;
}

/** MONGO_CREDENTIALS: MongoDB URLs with credentials (a list split on whitespace: a seed list has commas). */
export function parseMongoCredentials(urls: string[]): string[] {
  return urls.map((u, i) => {
    if (!/^mongodb(\+srv)?:\/\//i.test(u)) throw new ConfigError(`MONGO_CREDENTIALS: entry ${i + 1} must start with mongodb:// or mongodb+srv://`, { file: 'environment' });
    return encodeUrlCredentials(u);
  });
}
