// The fuzzer's site, drawn from the schedule's configuration: a few host names on one loopback port
// (the fleet maps them to 127.0.0.1 with HOST_RESOLVE), with plain pages, orphans only a re-seed
// reaches, broken links, cross-host redirects, pages built by a script (render), pages whose script
// sends the browser to another host, slow pages and pages that fail their first request.
import { startServer } from '../fixtures/http-server.mjs';

export const hostNames = (count) => Array.from({ length: count }, (_, i) => `fuzz-${i + 1}.test`);

const page = (title, links, extra = '') => `<!doctype html><html><head><title>${title}</title></head><body>${extra}${links.map((l) => `<a href="${l}">${l}</a>`).join(' ')}</body></html>`;
// The title is written by the script: a plain fetch finds an empty one (the item is invalid).
const scripted = (title) =>
  `<!doctype html><html><head><title></title></head><body><div id="app"></div><script>document.title = ${JSON.stringify(title)}; document.getElementById('app').textContent = 'ready';</script></body></html>`;
const jumping = (target) => `<!doctype html><html><head><title></title></head><body><script>location.replace(${JSON.stringify(target)});</script></body></html>`;

/** Pure: the site's pages (by host and path) and what a crawl of it must produce. */
export function siteModel(config, port) {
  const hosts = hostNames(config.hosts);
  const url = (host, path) => `http://${host}:${port}${path}`;
  const other = (i) => hosts[(i + 1) % hosts.length];
  const pages = new Map(); // `${host}${path}` -> { kind, body?, status?, location? }
  const items = new Map(); // item URL -> title
  const orphans = [];
  const dead = new Set();
  const plainFetched = new Set(); // URLs fetched plain (so archived with --warc)
  hosts.forEach((host, hi) => {
    const links = [];
    for (let i = 0; i < config.pagesPerHost; i++) links.push(`/p/${i}.html`);
    for (let i = 0; i < config.deadPerHost; i++) links.push(`/missing/${i}.html`);
    for (let i = 0; i < config.redirects; i++) links.push(`/go/${i}`);
    for (let i = 0; i < config.renderPages; i++) links.push(`/app/${i}.html`);
    for (let i = 0; i < config.browserRedirects; i++) links.push(`/app/jump-${i}.html`);
    const set = (path, entry) => pages.set(`${host}${path}`, entry);
    set('/index.html', { body: page(`${host} index`, links) });
    items.set(url(host, '/index.html'), `${host} index`);
    plainFetched.add(url(host, '/index.html'));
    for (let i = 0; i < config.pagesPerHost; i++) {
      const title = `${host} page ${i}`;
      const n = config.pagesPerHost;
      set(`/p/${i}.html`, { body: page(title, [`/p/${(i + 1) % n}.html`, `/p/${(i * 7 + 3) % n}.html`, '/index.html']), slow: config.slowMs > 0 && i % 5 === 0, flaky: config.flaky && i % 7 === 3 });
      items.set(url(host, `/p/${i}.html`), title);
      plainFetched.add(url(host, `/p/${i}.html`));
    }
    for (let i = 0; i < config.orphansPerHost; i++) {
      const title = `${host} orphan ${i}`;
      set(`/orphan/${i}.html`, { body: page(title, ['/index.html', `/p/0.html`]) });
      orphans.push({ url: url(host, `/orphan/${i}.html`), title });
    }
    for (let i = 0; i < config.deadPerHost; i++) dead.add(url(host, `/missing/${i}.html`));
    // a redirect to a page of the other host, which that host's index links too: one item, not two
    for (let i = 0; i < config.redirects; i++) set(`/go/${i}`, { status: 301, location: url(other(hi), `/p/${i % config.pagesPerHost}.html`) });
    for (let i = 0; i < config.renderPages; i++) {
      const title = `${host} app ${i}`;
      set(`/app/${i}.html`, { body: scripted(title) });
      items.set(url(host, `/app/${i}.html`), title);
    }
    // the browser leaves for a page of the other host that nothing else links: its item is the landing's
    for (let i = 0; i < config.browserRedirects; i++) {
      set(`/app/jump-${i}.html`, { body: jumping(url(other(hi), `/app/landing-${hi}-${i}.html`)) });
      const title = `${other(hi)} landing ${hi}-${i}`;
      pages.set(`${other(hi)}/app/landing-${hi}-${i}.html`, { body: page(title, []) });
      items.set(url(other(hi), `/app/landing-${hi}-${i}.html`), title);
    }
  });
  return { hosts, pages, items, orphans, dead, plainFetched, startUrls: hosts.map((h) => url(h, '/index.html')) };
}

/** Serves the model on loopback; a flaky page fails its first request, alternately a 503 and a dropped connection. */
export async function serveModel(model, config, port) {
  const failedOnce = new Set();
  let flakes = 0;
  const server = await startServer(
    async (req, res) => {
      const host = String(req.headers.host ?? '').replace(/:\d+$/, '');
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const entry = model.pages.get(`${host}${path}`);
      if (!entry) return void res.writeHead(404, { 'content-type': 'text/html' }).end('<html><head><title>404</title></head><body>not here</body></html>');
      if (entry.slow) await new Promise((r) => setTimeout(r, config.slowMs));
      if (entry.flaky && !failedOnce.has(`${host}${path}`)) {
        failedOnce.add(`${host}${path}`);
        if (flakes++ % 2 === 0) return void res.writeHead(503, { 'retry-after': '1' }).end('busy');
        return void req.socket.destroy();
      }
      if (entry.status) return void res.writeHead(entry.status, { location: entry.location }).end();
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(entry.body);
    },
    { port },
  );
  return server;
}

/** The spider of the schedule: every link followed, one item per page, the app pages rendered. */
export function fuzzSpider(model, config, port) {
  return {
    name: 'fuzz',
    startUrls: model.startUrls,
    allowedDomains: model.hosts.map((h) => `${h}:${port}`),
    allowPrivateAddresses: true,
    obeyRobotsTxt: false,
    follow: [{ css: 'a' }],
    items: [{ type: 'page', fields: { title: { css: 'title', required: true } } }],
    politeness: { concurrencyPerHost: 4, delayPerHost: config.delayMs },
    retry: { attempts: 6 },
    ...(config.renderers ? { render: { mode: 'never', rules: [{ match: '/app/', mode: 'always' }], waitFor: { maxWaitMs: 3000 }, timeoutMs: 20000 } } : {}),
    ...(config.recrawl ? { recrawl: {} } : {}),
  };
}
