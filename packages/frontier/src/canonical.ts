/**
 * The canonical form of a URL, so that links differing only in fragment, case of scheme and host,
 * default port or dot segments are one URL. The query is kept as is: its order can matter to a site.
 * Returns undefined for anything that is not an http(s) URL.
 */
export function canonicalizeUrl(href: string, base?: string): string | undefined {
  let url: URL;
  try {
    url = base === undefined ? new URL(href) : new URL(href, base);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  // WHATWG URL already lower-cases scheme and host, drops default ports and resolves dot segments.
  // Each setter re-serialises the URL, so only what is there is cleared (most links have none of it).
  if (url.hash) url.hash = '';
  if (url.username) url.username = '';
  if (url.password) url.password = '';
  const path = url.pathname;
  if (path === '') url.pathname = '/';
  else if (path.includes('//')) url.pathname = path.replace(/\/{2,}/g, '/');
  // An empty query ("/?") is the same resource as none; URL keeps the "?" in href, so drop it here.
  return url.search === '' && url.href.endsWith('?') ? url.href.slice(0, -1) : url.href;
}

/** `host` or `host:port` of a canonical URL, as `allowedDomains` spells it. */
export function hostOf(url: string): { hostname: string; host: string } {
  const u = new URL(url);
  return { hostname: u.hostname, host: u.host };
}
