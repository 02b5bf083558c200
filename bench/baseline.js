// The baselines, each run as its own process (so its CPU, peak RSS and start-up are measured as
// crawlfleet's are): `node bench/baseline.js bare|crawlee JOB.json`, where the job names the start
// URLs, the extraction (docs or books), the concurrency and the JSONL file for the items. Prints
// {"pages":…,"items":…} as the last line of stdout.
import { createWriteStream, readFileSync } from 'node:fs';
import { once } from 'node:events';
import { EXTRACTORS } from './sites.js';

const [kind, jobFile] = process.argv.slice(2);
const job = JSON.parse(readFileSync(jobFile, 'utf8'));
const extract = EXTRACTORS[job.extractor];
const out = createWriteStream(job.out);
let pages = 0;
let items = 0;
const keep = (found) => {
  items += found.items.length;
  if (found.items.length) out.write(`${found.items.map((i) => JSON.stringify(i)).join('\n')}\n`);
};

/** got + cheerio, an in-memory frontier (a FIFO and a Set), `concurrency` requests in flight. */
async function bare() {
  const { default: got } = await import('got');
  const cheerio = await import('cheerio');
  const seen = new Set(job.startUrls);
  const queue = [...job.startUrls];
  let next = 0;
  let active = 0;
  await new Promise((resolve, reject) => {
    const visit = async (url) => {
      const res = await got(url, { throwHttpErrors: false, retry: { limit: 0 } });
      pages++;
      if (res.statusCode !== 200) return;
      const found = extract(cheerio.load(res.body), url);
      keep(found);
      for (const l of found.links) {
        if (seen.has(l)) continue;
        seen.add(l);
        queue.push(l);
      }
    };
    const pump = () => {
      while (active < job.concurrency && next < queue.length) {
        active++;
        visit(queue[next++]).then(() => {
          active--;
          if (active === 0 && next === queue.length) resolve();
          else pump();
        }, reject);
      }
    };
    pump();
  });
}

/** Crawlee's CheerioCrawler, in-memory storage only, a fixed concurrency, no retries (no site errors here). */
async function crawlee() {
  const { CheerioCrawler, Configuration, log, LogLevel } = await import('@crawlee/cheerio');
  log.setLevel(LogLevel.WARNING);
  const config = new Configuration({ persistStorage: false, purgeOnStart: true });
  const crawler = new CheerioCrawler(
    {
      minConcurrency: job.concurrency,
      maxConcurrency: job.concurrency,
      maxRequestRetries: 0,
      maxRequestsPerMinute: Number.MAX_SAFE_INTEGER,
      requestHandlerTimeoutSecs: 60,
      async requestHandler({ $, request, response, enqueueLinks }) {
        pages++;
        // Crawlee hands a 404 to the handler (only 5xx and blocking codes fail a request)
        if (response.statusCode !== 200) return;
        const found = extract($, request.loadedUrl ?? request.url);
        keep(found);
        if (found.links.length) await enqueueLinks({ urls: found.links, strategy: 'all' });
      },
      // a 404 is a page fetched, with nothing in it to keep
      async failedRequestHandler() {
        pages++;
      },
    },
    config,
  );
  await crawler.run(job.startUrls);
}

await { bare, crawlee }[kind]();
out.end();
await once(out, 'finish');
process.stdout.write(`${JSON.stringify({ pages, items })}\n`);
process.exit(0);
