import { extname, resolve } from 'node:path';
import { ConfigError } from './errors.js';

/** Where a crawl's items go; stored with the crawl so any writer on any machine can open it. */
export type SinkSpec = { kind: 'jsonl' | 'csv'; path: string } | { kind: 'mongo'; url?: string };

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
