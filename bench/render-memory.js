// Renderer memory over a long crawl (issue #22): 2,000+ rendered pages of the script-built shop
// (test/fixtures/script-site.mjs), the fleet as separate processes (seed, fetcher, parser, writer,
// one renderer), and the renderer's whole process tree sampled every second: the node process and
// every Chromium process it started (browsers retired after RENDER_RETIRE_AFTER_PAGES included).
// RSS counts pages shared between Chromium's processes once per process; PSS divides them among the
// processes that share them, so its sum is what the tree really holds.
//   REDIS_URL=redis://... node bench/render-memory.js [--pages 2000] [--concurrency 4]
// (npm run bench does not run it: about 8 minutes.) Writes bench/results-render-memory.json.
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { scriptSiteSpider, startScriptSite } from '../test/fixtures/script-site.mjs';

const ROOT = join(import.meta.dirname, '..');
const { values } = parseArgs({ options: { pages: { type: 'string', default: '2000' }, concurrency: { type: 'string', default: '4' }, retire: { type: 'string', default: '100' } } });
const products = Number(values.pages);
const perPage = 50;

/** Every process whose ancestry leads to `root` (Playwright starts Chromium in a session of its own, as a child). */
function tree(root) {
  const parent = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {}
  }
  const inTree = (pid) => {
    for (let p = pid, hops = 0; p > 1 && hops < 50; p = parent.get(p) ?? 0, hops++) if (p === root) return true;
    return false;
  };
  return [...parent.keys()].filter(inTree);
}

function memoryOf(pids) {
  let rss = 0;
  let pss = 0;
  for (const pid of pids) {
    try {
      const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
      rss += Number(/^Rss:\s+(\d+)/m.exec(rollup)?.[1] ?? 0);
      pss += Number(/^Pss:\s+(\d+)/m.exec(rollup)?.[1] ?? 0);
    } catch {}
  }
  return { rssMb: rss / 1024, pssMb: pss / 1024, processes: pids.length };
}

const cli = (args, env) => spawn(join(ROOT, 'bin', 'crawlfleet'), args, { env, stdio: ['ignore', 'ignore', 'inherit'] });
const done = (child) => new Promise((resolve) => child.on('close', (code) => resolve(code)));

const site = await startScriptSite({ products, perPage });
const dir = mkdtempSync(join(tmpdir(), 'crawlfleet-render-memory-'));
const spiderFile = join(dir, 'shop.json');
writeFileSync(spiderFile, JSON.stringify({ ...scriptSiteSpider(site.url, 'always'), startUrls: [`${site.url}/app/list/1.html`], politeness: { concurrencyPerHost: 16 } }));
const env = { ...process.env, QUEUE_PREFIX: `bench-render-memory-${process.pid}`, LOG_LEVEL: 'warn', RENDER_RETIRE_AFTER_PAGES: values.retire };
const expected = products + Math.ceil(products / perPage);
if ((await done(cli(['seed', spiderFile, '--sink', join(dir, 'items.jsonl'), '--crawl-id', 'memory'], env))) !== 0) throw new Error('seed failed');
const workers = ['fetcher', 'parser', 'writer'].map((stage) => cli(['worker', stage], env));
const renderer = cli(['worker', 'renderer', '--concurrency', values.concurrency], env);
const started = Date.now();
const samples = [];
const timer = setInterval(() => {
  samples.push({ pages: site.visits.browser.size, seconds: (Date.now() - started) / 1000, ...memoryOf(tree(renderer.pid)) });
  const last = samples.at(-1);
  if (samples.length % 30 === 0) process.stderr.write(`${last.pages} pages, renderer tree ${last.pssMb.toFixed(0)} MB PSS, ${last.rssMb.toFixed(0)} MB RSS, ${last.processes} processes\n`);
}, 1000);
const waited = await done(cli(['wait', '--crawl-id', 'memory', '--timeout', '3600'], env));
clearInterval(timer);
for (const w of [...workers, renderer]) w.kill('SIGTERM');
await Promise.all([...workers, renderer].map(done));
await site.close();
if (waited !== 0) throw new Error('the crawl did not end done');

const items = readFileSync(join(dir, 'items.jsonl'), 'utf8').trim().split('\n').length;
const at = (pages) => samples.find((s) => s.pages >= pages);
const window = (from, to) => samples.filter((s) => s.pages >= from && s.pages <= to);
const stats = (list, key) => ({ min: Math.min(...list.map((s) => s[key])), max: Math.max(...list.map((s) => s[key])), mean: list.reduce((n, s) => n + s[key], 0) / list.length });
const late = window(500, expected);
const result = {
  pages: site.visits.browser.size,
  expectedPages: expected,
  items,
  seconds: (Date.now() - started) / 1000,
  concurrency: Number(values.concurrency),
  retireAfterPages: Number(values.retire),
  at: Object.fromEntries([100, 250, 500, 1000, 1500, 2000].filter((p) => at(p)).map((p) => [p, { pssMb: Math.round(at(p).pssMb), rssMb: Math.round(at(p).rssMb) }])),
  from500: { pssMb: stats(late, 'pssMb'), rssMb: stats(late, 'rssMb') },
  peak: { pssMb: Math.max(...samples.map((s) => s.pssMb)), rssMb: Math.max(...samples.map((s) => s.rssMb)) },
  // the trend of PSS from page 500 on: MB per 1,000 pages (least squares)
  pssSlopeMbPer1000Pages: slope(late.map((s) => [s.pages, s.pssMb])) * 1000,
  samples: samples.filter((_, i) => i % 5 === 0),
};
writeFileSync(join(ROOT, 'bench', 'results-render-memory.json'), `${JSON.stringify(result, null, 2)}\n`);
const { samples: _omitted, ...summary } = result;
console.log(JSON.stringify(summary, null, 2));

function slope(points) {
  const n = points.length;
  const mx = points.reduce((a, [x]) => a + x, 0) / n;
  const my = points.reduce((a, [, y]) => a + y, 0) / n;
  const num = points.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0);
  const den = points.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  return den === 0 ? 0 : num / den;
}
