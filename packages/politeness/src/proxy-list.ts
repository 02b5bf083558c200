import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError, encodeUrlCredentials, readListValue, redactUrl } from '@crawlfleet/core';

/** One proxy of the pool. `label` is the URL with its credentials redacted: the only form shown. */
export interface ProxyEntry {
  id: string;
  url: string;
  label: string;
}

/** A proxy's id: a hash of its URL, so every fetcher names it alike without showing credentials. */
export function proxyId(url: string): string {
  return createHash('sha1').update(url).digest('hex').slice(0, 12);
}

/**
 * Pure: checks proxy URLs (`http://` or `https://`, with optional `user:password@`). `where(i)` names
 * the i-th one for an error ("PROXY_LIST: proxy 2", "proxies.txt:3"), which never shows a password.
 */
export function parseProxyUrls(urls: string[], source: string, where: (index: number) => string = (i) => `${source}: proxy ${i + 1}`): ProxyEntry[] {
  const seen = new Set<string>();
  const entries: ProxyEntry[] = [];
  urls.forEach((raw, index) => {
    const refuse = (problem: string) => new ConfigError(`${where(index)}: ${problem}`, { file: source, issues: [where(index)] });
    let url: URL;
    try {
      // a password pasted unencoded (`user:p@ss/w@host`) is encoded, not refused
      url = new URL(encodeUrlCredentials(raw));
    } catch {
      // Not a URL, so redactUrl cannot find its credentials: hide everything up to the last '@'.
      throw refuse(`not a URL: ${JSON.stringify(raw.includes('@') ? `***@${raw.slice(raw.lastIndexOf('@') + 1)}` : raw)}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw refuse(`must be http:// or https://, got ${url.protocol}`);
    const normalised = url.href.replace(/\/$/, '');
    if (seen.has(normalised)) return;
    seen.add(normalised);
    entries.push({ id: proxyId(normalised), url: normalised, label: redactUrl(normalised) });
  });
  return entries;
}

/** The proxies of a file, one per line (`#` comments), each named by its line for errors. */
function readProxyFile(file: string): ProxyEntry[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`${file}: cannot read the proxy list: ${(err as Error).message}`, { file, cause: err });
  }
  const lines = text
    .split('\n')
    .map((l, i) => ({ url: l.trim(), line: i + 1 }))
    .filter((l) => l.url && !l.url.startsWith('#'));
  return parseProxyUrls(
    lines.map((l) => l.url),
    file,
    (i) => `${file}:${lines[i]!.line}`,
  );
}

/** The pool from `--proxies FILE` when given, else PROXY_LIST (comma- or newline-separated, or `@file`). */
export function loadProxyList(options: { file?: string; env?: string }): ProxyEntry[] {
  if (options.file) return readProxyFile(options.file);
  if (options.env?.trim().startsWith('@')) return readProxyFile(options.env.trim().slice(1));
  if (options.env) return parseProxyUrls(readListValue(options.env, 'PROXY_LIST'), 'PROXY_LIST');
  return [];
}
