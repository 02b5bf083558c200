import { createHash } from 'node:crypto';
import { ConfigError, readListValue, redactUrl } from '@crawlfleet/core';

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
 * Pure: checks proxy URLs (`http://` or `https://`, with optional `user:password@`). `source` names
 * where they came from (PROXY_LIST or the --proxies file) for the error, which never shows a password.
 */
export function parseProxyUrls(urls: string[], source: string): ProxyEntry[] {
  const seen = new Set<string>();
  const entries: ProxyEntry[] = [];
  urls.forEach((raw, index) => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new ConfigError(`${source}: proxy ${index + 1} is not a URL: ${JSON.stringify(redactUrl(raw))}`, { file: source, issues: [`proxy ${index + 1}`] });
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new ConfigError(`${source}: proxy ${index + 1} must be http:// or https://, got ${url.protocol}`, { file: source, issues: [`proxy ${index + 1}`] });
    }
    if (!url.port && !url.hostname) throw new ConfigError(`${source}: proxy ${index + 1} has no host`, { file: source, issues: [`proxy ${index + 1}`] });
    const normalised = url.href.replace(/\/$/, '');
    if (seen.has(normalised)) return;
    seen.add(normalised);
    entries.push({ id: proxyId(normalised), url: normalised, label: redactUrl(normalised) });
  });
  return entries;
}

/** The pool from `--proxies FILE` when given, else PROXY_LIST (comma- or newline-separated, or `@file`). */
export function loadProxyList(options: { file?: string; env?: string }): ProxyEntry[] {
  if (options.file) return parseProxyUrls(readListValue(`@${options.file}`, '--proxies'), options.file);
  if (options.env) return parseProxyUrls(readListValue(options.env, 'PROXY_LIST'), options.env.trim().startsWith('@') ? options.env.trim().slice(1) : 'PROXY_LIST');
  return [];
}
