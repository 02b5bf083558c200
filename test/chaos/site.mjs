// The chaos suite's site: a folder of real HTML pages (Debian's Python documentation) served on
// loopback under several host names, which the fetchers map to 127.0.0.1 with HOST_RESOLVE. The
// same 530 pages under 2 or 3 names make 1,060 or 1,590 distinct URLs.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { serveFolder } from '../fixtures/static-site.mjs';

/** CHAOS_SITE, or the html folder of the newest python3.X-doc installed. */
export function findSiteRoot() {
  if (process.env.CHAOS_SITE) return process.env.CHAOS_SITE;
  const docs = '/usr/share/doc';
  const candidates = existsSync(docs)
    ? readdirSync(docs)
        .filter((d) => /^python3\.\d+-doc$/.test(d) && existsSync(join(docs, d, 'html', 'index.html')))
        .sort((a, b) => Number(b.split('.')[1].split('-')[0]) - Number(a.split('.')[1].split('-')[0]))
    : [];
  if (candidates.length === 0) {
    throw Object.assign(new Error("no site for the chaos suite: install Debian's python3-doc (apt-get install python3-doc), or set CHAOS_SITE to a folder of .html pages"), { exitCode: 2 });
  }
  return join(docs, candidates[0], 'html');
}

/** Every .html file under root, as a path relative to it with "/" separators. */
export function htmlFiles(root, sub = '') {
  const out = [];
  for (const entry of readdirSync(join(root, sub), { withFileTypes: true })) {
    const rel = sub ? `${sub}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...htmlFiles(root, rel));
    else if (entry.name.endsWith('.html')) out.push(rel);
  }
  return out.sort();
}

/** Serves root for any Host on one loopback port; the bodies are read once and kept. */
export function serveSite(root) {
  return serveFolder(root, { cache: true });
}

export function hostNames(count) {
  return Array.from({ length: count }, (_, i) => `docs-${i + 1}.test`);
}

/**
 * One item per page (its URL and <title>); follows every in-site link to an .html page, so every
 * page's links go through admission (all of them already seeded: the frontier must drop them) and a
 * link to a missing page is fetched once and dead-lettered as a 404.
 */
export function docsSpider(hosts, port) {
  return {
    name: 'chaos-docs',
    startUrls: hosts.map((h) => `http://${h}:${port}/index.html`),
    allowedDomains: hosts.map((h) => `${h}:${port}`),
    allowPrivateAddresses: true,
    obeyRobotsTxt: false,
    follow: [{ css: 'a', allow: ['\\.html$'] }],
    items: [{ type: 'page', fields: { title: { css: 'title', required: true } } }],
    politeness: { concurrencyPerHost: 8, delayPerHost: 0 },
  };
}

export function pageUrl(host, port, path) {
  return `http://${host}:${port}/${path}`;
}
