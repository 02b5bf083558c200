// The benchmark's sites: real HTML served by a private nginx on loopback, each with the spider
// crawlfleet runs, the hand-written extraction the baselines run (the same fields and links), and
// the ground truth (pages fetched, items extracted) that every run must reach.
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as cheerio from 'cheerio';
import { canonicalizeUrl } from '@crawlfleet/frontier';
import { BOOKS_ARCHIVE, unpack } from '../test/fixtures/static-site.mjs';
import { findSiteRoot } from '../test/chaos/site.mjs';

/** 10 loopback addresses, one "host" each: all of 127/8 is loopback on Linux. */
const MULTI_HOSTS = Array.from({ length: 10 }, (_, i) => `127.0.1.${i + 1}`);
const SINGLE_HOST = '127.0.2.1';
const BOOKS_HOST = '127.0.3.1';
/** The books pages under 10 more addresses: a multi-host site of small pages (about 10 KB each). */
const MULTI_BOOKS_HOSTS = Array.from({ length: 10 }, (_, i) => `127.0.4.${i + 1}`);
/** Multi-host keeps the default per-host limit (8 × 10 hosts ≥ the crawl's 64); see docs. */
const MULTI_PER_HOST = 8;

// ---- extraction shared by the baselines (crawlfleet runs the spider's rules instead) ----

/** The canonical form of the frontier (no fragment, no credentials), so both crawls see the same URLs. */
export const canonical = (href, base) => canonicalizeUrl(href.trim(), base);

function baseOf($, url) {
  const href = $('base[href]').first().attr('href');
  return href ? (canonical(href, url) ?? url) : url;
}

const firstText = (scope, css) => {
  const el = scope.find(css).first();
  return el.length ? el.text().trim() : null;
};
const numberIn = (text) => {
  const m = text?.match(/([0-9.]+)/);
  return m ? Number(m[1]) : null;
};

/** The docs pages: title (required) and h1 of every page; follows every in-host link to an .html page. */
function extractDoc($, url) {
  const title = firstText($.root(), 'title');
  const items = title ? [{ type: 'page', url, title, h1: firstText($.root(), 'h1') }] : [];
  const base = baseOf($, url);
  const host = new URL(url).host;
  const links = new Set();
  $('a').each((_, a) => {
    const href = $(a).attr('href');
    const u = href && canonical(href, base);
    if (u && /\.html$/.test(u) && new URL(u).host === host) links.add(u);
  });
  return { items, links: [...links] };
}

const LISTING = /^https?:\/\/[^/]+\/(index\.html)?$|\/catalogue\/page-\d+\.html$/;
const BOOK = /\/catalogue\/[^/]+_\d+\/index\.html$/;

/** The books pages: examples/books.json's two item rules and two follow rules, by hand. */
function extractBooks($, url) {
  const base = baseOf($, url);
  const items = [];
  if (LISTING.test(url)) {
    $('article.product_pod').each((_, el) => {
      const pod = $(el);
      const a = pod.find('h3 a').first();
      const link = a.attr('href') && canonical(a.attr('href'), base);
      const title = a.attr('title')?.trim();
      if (!link || !title) return;
      const rating =
        pod
          .find('p.star-rating')
          .first()
          .attr('class')
          ?.match(/star-rating (\w+)/)?.[1] ?? null;
      items.push({ type: 'listing', url, link, title, price: numberIn(firstText(pod, '.price_color')), rating });
    });
  }
  if (BOOK.test(url)) {
    const main = $.root();
    const title = firstText(main, '.product_main h1');
    const upc = firstText(main, 'table.table tr:first-child td');
    if (title && upc) {
      const availability = firstText(main, '.product_main .availability');
      const inStock = availability?.match(/\((\d+) available\)/)?.[1];
      const rating =
        main
          .find('.product_main p.star-rating')
          .first()
          .attr('class')
          ?.match(/star-rating (\w+)/)?.[1] ?? null;
      items.push({ type: 'book', url, title, price: numberIn(firstText(main, '.product_main .price_color')), upc, availability, inStock: inStock ? Number(inStock) : null, rating });
    }
  }
  const host = new URL(url).host;
  const links = new Set();
  $('li.next a, article.product_pod h3 a').each((_, a) => {
    const href = $(a).attr('href');
    const u = href && canonical(href, base);
    if (u && new URL(u).host === host) links.add(u);
  });
  return { items, links: [...links] };
}

// ---- the sites ----

function docsSpider(name, hosts, port, perHost) {
  return {
    name,
    startUrls: hosts.map((h) => `http://${h}:${port}/index.html`),
    allowedDomains: hosts.map((h) => `${h}:${port}`),
    allowedAddresses: ['127.0.0.0/8'],
    obeyRobotsTxt: false,
    follow: [{ css: 'a', allow: ['\\.html$'] }],
    items: [{ type: 'page', fields: { title: { css: 'title', required: true }, h1: { css: 'h1' } } }],
    politeness: { concurrencyPerHost: perHost, delayPerHost: 0 },
  };
}

function booksSpider(name, hosts, port, perHost) {
  const example = JSON.parse(readFileSync(new URL('../examples/books.json', import.meta.url), 'utf8'));
  const one = JSON.parse(JSON.stringify(example).replaceAll('127.0.0.1:8080', `${hosts[0]}:${port}`));
  const startUrls = hosts.flatMap((h) => example.startUrls.map((u) => u.replace('127.0.0.1:8080', `${h}:${port}`)));
  delete one.allowPrivateAddresses;
  // A book is the same UPC on every host: across hosts it is told apart by its page (the default key).
  if (hosts.length > 1) for (const rule of one.items) if (rule.key === 'upc') delete rule.key;
  return {
    ...one,
    name,
    startUrls,
    allowedDomains: hosts.map((h) => `${h}:${port}`),
    allowedAddresses: ['127.0.0.0/8'],
    politeness: { concurrencyPerHost: perHost, delayPerHost: 0 },
  };
}

/**
 * Pure over the files: the crawl a correct crawler makes, walked on disk with the baselines'
 * extraction. A link to a missing file is a page fetched (a 404) with no items and no links.
 */
function groundTruth(root, startUrls, extract) {
  const seen = new Set(startUrls);
  const queue = [...startUrls];
  let items = 0;
  for (let i = 0; i < queue.length; i++) {
    const url = queue[i];
    const file = join(root, decodeURIComponent(new URL(url).pathname));
    if (!existsSync(file) || !file.endsWith('.html')) continue;
    const found = extract(cheerio.load(readFileSync(file, 'utf8')), url);
    items += found.items.length;
    for (const l of found.links) {
      if (seen.has(l)) continue;
      seen.add(l);
      queue.push(l);
    }
  }
  return { pages: queue.length, items };
}

/** The site definitions for the hosts and port nginx serves; `docsRoot` and `booksRoot` are folders. */
export function defineSites({ port, docsRoot, booksRoot, concurrency }) {
  const sites = {
    multi: { spider: docsSpider('bench-multi', MULTI_HOSTS, port, MULTI_PER_HOST), root: docsRoot, extract: extractDoc, hosts: MULTI_HOSTS },
    single: { spider: docsSpider('bench-single', [SINGLE_HOST], port, concurrency), root: docsRoot, extract: extractDoc, hosts: [SINGLE_HOST] },
    books: { spider: booksSpider('books', [BOOKS_HOST], port, concurrency), root: booksRoot, extract: extractBooks, hosts: [BOOKS_HOST] },
    'multi-books': { spider: booksSpider('bench-multi-books', MULTI_BOOKS_HOSTS, port, MULTI_PER_HOST), root: booksRoot, extract: extractBooks, hosts: MULTI_BOOKS_HOSTS },
  };
  // Every host serves the same pages and no link crosses hosts: one host's walk, times the hosts.
  const walks = new Map();
  for (const site of Object.values(sites)) {
    site.startUrls = site.spider.startUrls;
    const one = new URL(site.startUrls[0]);
    const id = `${site.root}|${one.port}|${one.pathname}`;
    let truth;
    // walked on first use: only the sites a run asks for
    Object.defineProperty(site, 'truth', {
      get() {
        if (!walks.has(id)) walks.set(id, groundTruth(site.root, [`http://${SINGLE_HOST}:${one.port}${one.pathname}`], site.extract));
        const walk = walks.get(id);
        truth ??= { pages: walk.pages * site.hosts.length, items: walk.items * site.hosts.length };
        return truth;
      },
    });
  }
  return sites;
}

export const EXTRACTORS = { docs: extractDoc, books: extractBooks };
export const extractorName = (site) => (site.extract === extractBooks ? 'books' : 'docs');

// ---- nginx ----

function nginxConfig(dir, port, servers) {
  const user = process.getuid?.() === 0 ? 'user nobody nogroup;' : '';
  const blocks = servers.map((s) => `  server {\n${s.hosts.map((h) => `    listen ${h}:${port};`).join('\n')}\n    root ${s.root};\n  }`).join('\n');
  return `${user}
worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000;
  keepalive_timeout 60s;
  open_file_cache max=20000 inactive=60s;
  open_file_cache_errors on;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${blocks}
}
`;
}

async function waitForPort(host, port) {
  const { connect } = await import('node:net');
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise((resolve) => {
      const s = connect(port, host, () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nginx did not start listening on ${host}:${port}`);
}

/**
 * One private nginx (its own prefix, config, pid and logs in `dir`; loopback only) serving every
 * site on one port: python3-doc under the multi-host and single-host addresses, the books pages
 * under theirs. Returns the sites and a stop function.
 */
export async function startSites({ dir, port, concurrency }) {
  const docsRoot = findSiteRoot();
  const booksRoot = unpack(BOOKS_ARCHIVE);
  // nginx's workers run as nobody: the unpacked folder must be readable by others.
  for (const d of [booksRoot, ...walkDirs(booksRoot)]) chmodSync(d, 0o755);
  const sites = defineSites({ port, docsRoot, booksRoot, concurrency });
  mkdirSync(dir, { recursive: true });
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    nginxConfig(
      dir,
      port,
      Object.values(sites).map((s) => ({ hosts: s.hosts, root: s.root })),
    ),
  );
  const child = spawn('nginx', ['-p', dir, '-c', conf, '-e', join(dir, 'error.log')], { stdio: ['ignore', 'inherit', 'inherit'] });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  await Promise.race([waitForPort(MULTI_HOSTS[0], port), exited.then((code) => Promise.reject(new Error(`nginx exited ${code}; see ${dir}/error.log`)))]);
  for (const s of Object.values(sites)) await waitForPort(s.hosts[0], port);
  return {
    sites,
    stop: async () => {
      child.kill('SIGQUIT');
      await exited;
      rmSync(booksRoot, { recursive: true, force: true });
    },
  };
}

function walkDirs(root) {
  return readdirSync(root, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .flatMap((e) => [join(root, e.name), ...walkDirs(join(root, e.name))]);
}
