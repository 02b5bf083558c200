/**
 * Pure: where a Location header points, resolved against the URL that sent it. Servers send raw
 * UTF-8 bytes in Location, which Node reads as latin1; they are read back as UTF-8, as got does.
 */
export function redirectTarget(location: string | undefined, base: string): URL | undefined {
  if (!location) return undefined;
  try {
    const target = new URL(Buffer.from(location, 'latin1').toString('utf8'), base);
    return target.protocol === 'http:' || target.protocol === 'https:' ? target : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Pure: may a redirect be followed inside the request that met it? Only to the same origin (scheme,
 * host and port): it keeps the host's politeness slot and robots.txt. Any other target is a new URL
 * of the crawl, with its own dedup, scope, robots.txt and slot, as Scrapy's scheduler treats it.
 */
export function isInlineRedirect(from: URL, to: URL): boolean {
  return from.origin === to.origin;
}
