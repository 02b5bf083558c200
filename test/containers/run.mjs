// The container test (scripts/test-containers.sh sets it up): docker-compose.yml as users run it,
// the image built from infra/Dockerfile, on a real Docker engine. It checks, in order:
//  1. `up -d --wait --build` builds the image and starts the demo crawl;
//  2. while it runs, `--scale fetcher=3 --scale parser=2`, then `docker kill` of one fetcher;
//  3. the crawl ends with exactly the demo's 980 listings and 200 books in MongoDB;
//  3b. `--profile render`: the renderer's image (infra/Dockerfile, VARIANT=renderer) builds; Chromium
//     starts in it and runs a page's script (its own command line, then playwright-core under the
//     Kubernetes pod's restrictions), the small image has no Chromium, and the renderer service
//     turns healthy;
//  4. `--profile monitoring`: Prometheus scrapes all 3 fetchers and the renderer, and its crawl totals equal `status`;
//  5. Bull Board on the published port asks for the password; Chromium shows the three queues;
//  6. `down` then `up -d --wait`: the items and the crawl state survive, the second seeding changes
//     nothing;
//  7. `down -v` leaves no volume behind, anonymous ones included.
// Figures (the two images' sizes, timings) go to stdout and test-artifacts/containers.json.
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const require = createRequire(join(ROOT, 'package.json'));
const { chromium } = require('playwright-core');
const run = promisify(execFile);

const COMPOSE = process.env.COMPOSE_BIN;
const PROJECT = process.env.CONTAINERS_PROJECT ?? `crawlfleet-ci-${process.pid}`;
if (!COMPOSE) throw new Error('COMPOSE_BIN is not set: run scripts/test-containers.sh');
const CRAWL_ID = 'books-demo';
const RENDERER_IMAGE = 'crawlfleet-renderer:latest';
/** A page whose text only a browser that runs its script shows. */
const SCRIPT_PAGE = `data:text/html,<p id="out">static</p><script>document.getElementById('out').textContent = 'built by ' + 'script'</script>`;
const BUILT = 'built by script';
const EXPECTED = { listing: 980, book: 200 };
const ARTIFACTS = join(ROOT, 'test-artifacts');
const figures = {};
const started = performance.now();

function log(message) {
  console.log(`[containers ${((performance.now() - started) / 1000).toFixed(0).padStart(4)} s] ${message}`);
}

function check(condition, message) {
  if (!condition) throw new Error(`container test: ${message}`);
  log(`ok: ${message}`);
}

async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const dashboardPort = await freePort();
const prometheusPort = await freePort();
const user = 'admin';
const password = randomBytes(12).toString('hex');
// Only what the compose file reads; nothing of this shell's crawlfleet settings.
const env = {
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  DOCKER_CONFIG: process.env.DOCKER_CONFIG ?? join(process.env.HOME ?? '/root', '.docker'),
  DASHBOARD_PORT: String(dashboardPort),
  PROMETHEUS_PORT: String(prometheusPort),
  DASHBOARD_USER: user,
  DASHBOARD_PASSWORD: password,
  // about a minute of crawling at 8 requests at a time: time to scale out and kill a fetcher as it runs
  DEMO_LATENCY_MS: '400',
};
const FILES = ['-p', PROJECT, '-f', join(ROOT, 'docker-compose.yml'), '-f', join(ROOT, 'test', 'containers', 'compose.test.yml')];

async function compose(args, { timeoutMs = 600_000 } = {}) {
  try {
    const { stdout } = await run(COMPOSE, [...FILES, ...args], { cwd: ROOT, env, timeout: timeoutMs, maxBuffer: 64 << 20 });
    return stdout;
  } catch (error) {
    const diagnosis = args.includes('up') ? await diagnose() : '';
    throw new Error(`docker compose ${args.join(' ')} failed: ${error.message}\n${error.stdout ?? ''}\n${error.stderr ?? ''}${diagnosis}`);
  }
}

/** Why `up` failed: each container's state and its health probes' last outputs, and the logs' tails. */
async function diagnose() {
  const lines = ['\n--- diagnosis ---'];
  const attempt = async (what, action) => {
    try {
      lines.push(`${what}:`, (await action()).trim());
    } catch (error) {
      lines.push(`${what}: could not be read (${error.message.split('\n')[0]})`);
    }
  };
  const ids = async () => (await run(COMPOSE, [...FILES, 'ps', '-a', '-q'], { cwd: ROOT, env })).stdout.split('\n').filter(Boolean);
  await attempt('containers and their health', async () => {
    const { stdout } = await run('docker', ['inspect', '--format', '{{.Name}} {{.State.Status}} exit={{.State.ExitCode}} restarts={{.RestartCount}} health={{json .State.Health}}', ...(await ids())]);
    return stdout;
  });
  await attempt('logs (last 30 lines each)', async () => (await run(COMPOSE, [...FILES, 'logs', '--no-color', '--tail', '30'], { cwd: ROOT, env, maxBuffer: 16 << 20 })).stdout);
  return lines.join('\n');
}

async function timed(name, action) {
  const t0 = performance.now();
  const result = await action();
  figures[name] = Number(((performance.now() - t0) / 1000).toFixed(1));
  log(`${name}: ${figures[name]} s`);
  return result;
}

/** crawlfleet's own CLI in a one-off container of the image (`docker compose run --rm seeder ...`). */
async function cli(args, options) {
  return compose(['run', '--rm', '--no-deps', '-T', 'seeder', ...args], options);
}

async function status() {
  return JSON.parse(await cli(['status', '--crawl-id', CRAWL_ID, '--json']));
}

/** The items in MongoDB, read from inside the compose network with the driver the image carries. */
async function storedItems() {
  const script = `
    const { MongoClient } = require('/app/node_modules/mongodb');
    (async () => {
      const client = await MongoClient.connect('mongodb://mongo:27017');
      const db = client.db('crawlfleet');
      const out = {};
      for (const type of ['listing', 'book']) {
        const docs = await db.collection(type).find({}, { projection: { _id: 1, title: 1 } }).toArray();
        out[type] = { count: docs.length, distinct: new Set(docs.map((d) => String(d._id))).size, untitled: docs.filter((d) => !d.title).length };
      }
      console.log(JSON.stringify(out));
      await client.close();
    })().catch((e) => { console.error(e); process.exit(1); });`;
  return JSON.parse((await compose(['run', '--rm', '--no-deps', '-T', '--entrypoint', 'node', 'seeder', '-e', script])).trim().split('\n').pop());
}

function expectExactItems(items, when) {
  for (const [type, count] of Object.entries(EXPECTED)) {
    check(
      items[type].count === count && items[type].distinct === count && items[type].untitled === 0,
      `${when}: ${items[type].count} ${type} documents, ${items[type].distinct} distinct, expected ${count}`,
    );
  }
}

async function containers(service) {
  return (await compose(['ps', '-q', service])).split('\n').filter(Boolean);
}

function volumes() {
  return new Set(execFileSync('docker', ['volume', 'ls', '-q'], { encoding: 'utf8' }).split('\n').filter(Boolean));
}

async function waitFor(what, predicate, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate().catch(() => undefined);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`container test: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

const volumesBefore = volumes();

// 1. Build and start.
await timed('upBuildSeconds', () => compose(['up', '-d', '--wait', '--build'], { timeoutMs: 1_200_000 }));
const imageSizeMB = (name) => Math.round(JSON.parse(execFileSync('docker', ['image', 'inspect', name], { encoding: 'utf8' }))[0].Size / 1e6);
figures.imageSizeMB = imageSizeMB('crawlfleet:latest');
log(`image crawlfleet:latest: ${figures.imageSizeMB} MB`);
const typescriptInImage = (await compose(['run', '--rm', '--no-deps', '-T', '--entrypoint', 'sh', 'seeder', '-c', 'ls /app/node_modules/typescript 2>/dev/null | wc -l'])).trim();
check(typescriptInImage === '0', 'TypeScript is not in the runtime image');

// 2. Scale out and kill a fetcher while the crawl runs.
const early = await status();
check(early.state === 'running', `the crawl is running when the fleet scales (${early.counters.fetched} pages fetched)`);
await timed('scaleSeconds', () => compose(['up', '-d', '--wait', '--no-recreate', '--scale', 'fetcher=3', '--scale', 'parser=2']));
const fetchers = await containers('fetcher');
check(fetchers.length === 3 && (await containers('parser')).length === 2, `3 fetchers and 2 parsers run (${fetchers.length} fetchers)`);
const beforeKill = await status();
await timed('killSeconds', () => run('docker', ['kill', fetchers[0]]));
check(beforeKill.state === 'running', `one fetcher killed mid-crawl, at ${beforeKill.counters.fetched} pages fetched`);

// 3. The crawl ends exact.
await timed('waitSeconds', () => cli(['wait', '--crawl-id', CRAWL_ID, '--timeout', '900'], { timeoutMs: 960_000 }));
figures.crawlSeconds = Number(((performance.now() - started) / 1000).toFixed(1));
const done = await status();
expectExactItems(await storedItems(), 'after the crawl');
check(done.counters.written === EXPECTED.listing + EXPECTED.book, `status counts ${done.counters.written} items written`);
log(`status: ${JSON.stringify(done.counters)}`);

// 3b. The renderer's image: built by its service (the build stage is the one above, cached), with a
// Chromium that starts and runs a script, as the image's user and under the pod's restrictions.
await timed('rendererBuildSeconds', () => compose(['--profile', 'render', 'build', 'renderer'], { timeoutMs: 1_200_000 }));
figures.rendererImageSizeMB = imageSizeMB(RENDERER_IMAGE);
log(`image ${RENDERER_IMAGE}: ${figures.rendererImageSizeMB} MB (crawlfleet:latest: ${figures.imageSizeMB} MB)`);
const inSmallImage = (await run('docker', ['run', '--rm', '--entrypoint', 'sh', 'crawlfleet:latest', '-c', 'command -v chromium; ls /usr/lib/chromium 2>/dev/null | wc -l'])).stdout.trim();
check(inSmallImage === '0', `the small image has no Chromium (${JSON.stringify(inSmallImage)})`);
const dumped = await timed('chromiumDumpDomSeconds', () =>
  run('docker', ['run', '--rm', '--entrypoint', 'chromium', RENDERER_IMAGE, '--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--dump-dom', SCRIPT_PAGE], { timeout: 120_000 }),
);
check(dumped.stdout.includes(`<p id="out">${BUILT}</p>`), `Chromium in ${RENDERER_IMAGE} runs a page's script (chromium --headless --dump-dom as the image's user)`);
// As the renderer drives it (playwright-core, the image's own copy, CHROMIUM_PATH), with what the
// Kubernetes Deployment imposes: uid 1000, a read-only root, no capability, no privilege gain, /tmp
// its only writable place (an emptyDir there).
const driven = await timed('chromiumPlaywrightSeconds', () =>
  run(
    'docker',
    [
      'run',
      '--rm',
      '--read-only',
      '--tmpfs',
      '/tmp',
      '--user',
      '1000:1000',
      '--cap-drop',
      'ALL',
      '--security-opt',
      'no-new-privileges',
      '--entrypoint',
      'node',
      RENDERER_IMAGE,
      '-e',
      `const { chromium } = require('/app/node_modules/playwright-core');
      (async () => {
        const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH });
        const page = await browser.newPage();
        await page.goto(${JSON.stringify(SCRIPT_PAGE)});
        console.log(JSON.stringify({ chromium: process.env.CHROMIUM_PATH, version: browser.version(), text: await page.textContent('#out') }));
        await browser.close();
      })().catch((e) => { console.error(e); process.exit(1); });`,
    ],
    { timeout: 120_000 },
  ),
);
const launched = JSON.parse(driven.stdout.trim().split('\n').pop());
figures.chromiumVersion = launched.version;
check(
  launched.text === BUILT && launched.chromium === '/usr/bin/chromium',
  `playwright-core drives Chromium ${launched.version} (${launched.chromium}) as uid 1000 on a read-only root without capabilities, and the page's script ran`,
);
await timed('rendererUpSeconds', () => compose(['--profile', 'render', 'up', '-d', '--wait', '--no-deps', 'renderer']));
check((await containers('renderer')).length === 1, 'the renderer service is up and healthy (its /readyz), idle until a crawl renders');

// 4. Prometheus scrapes every fetcher replica, the renderer and the dashboard; the crawl's totals equal status.
await timed('monitoringUpSeconds', () => compose(['--profile', 'monitoring', 'up', '-d', '--wait', '--scale', 'fetcher=3', '--scale', 'parser=2', 'prometheus', 'fetcher', 'parser']));
const promUrl = `http://127.0.0.1:${prometheusPort}`;
const fetcherTargets = await waitFor(
  '3 healthy fetcher targets in Prometheus',
  async () => {
    const targets = (await (await fetch(`${promUrl}/api/v1/targets?state=active`)).json()).data.activeTargets;
    const up = targets.filter((t) => t.labels.stage === 'fetcher' && t.health === 'up');
    return up.length === 3 ? up : undefined;
  },
  120_000,
);
check(fetcherTargets.length === 3, 'Prometheus lists 3 fetcher targets, all up');
await waitFor(
  'the renderer target up in Prometheus',
  async () => {
    const targets = (await (await fetch(`${promUrl}/api/v1/targets?state=active`)).json()).data.activeTargets;
    return targets.filter((t) => t.labels.stage === 'renderer' && t.health === 'up').length === 1;
  },
  120_000,
);
check(true, 'Prometheus lists the renderer target, up');
async function promValue(query) {
  const result = (await (await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(query)}`)).json()).data.result;
  return result.length === 1 ? Number(result[0].value[1]) : undefined;
}
for (const [counter, value] of Object.entries(done.counters)) {
  await waitFor(
    `Prometheus's ${counter} total to equal status (${value})`,
    async () => (await promValue(`crawlfleet_crawl_${counter.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}_total{crawl="${CRAWL_ID}"}`)) === value,
    60_000,
  );
}
check(true, `Prometheus's crawl totals equal status's ${Object.keys(done.counters).length} counters`);

// 5. Bull Board on the published port: the password, then the three queues in Chromium.
const dashboard = `http://127.0.0.1:${dashboardPort}`;
check((await fetch(`${dashboard}/`)).status === 401, 'Bull Board without the password: 401');
const authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
check((await fetch(`${dashboard}/`, { headers: { authorization } })).status === 200, 'Bull Board with the password: 200');
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
try {
  const page = await (await browser.newContext({ httpCredentials: { username: user, password } })).newPage();
  await page.goto(dashboard);
  for (const queue of ['fetch', 'parse', 'write']) await page.getByText(queue, { exact: true }).first().waitFor({ timeout: 30_000 });
  await page.getByText('Loading...').first().waitFor({ state: 'hidden', timeout: 30_000 });
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, 'containers-bull-board.png'), fullPage: true });
  check(true, 'Chromium shows Bull Board with the fetch, parse and write queues (test-artifacts/containers-bull-board.png)');
} finally {
  await browser.close();
}

// 6. down, then up: the volumes keep the items and the crawl; seeding again changes nothing.
await timed('downSeconds', () => compose(['--profile', 'monitoring', '--profile', 'render', 'down', '--timeout', '30']));
await timed('upAgainSeconds', () => compose(['up', '-d', '--wait'], { timeoutMs: 600_000 }));
await waitFor(
  'the seeder to run again and exit 0',
  async () => JSON.parse(await compose(['ps', '-a', '--format', 'json', 'seeder']).then((o) => `[${o.trim().split('\n').join(',')}]`)).some((c) => c.State === 'exited' && c.ExitCode === 0),
  120_000,
);
await new Promise((r) => setTimeout(r, 5000));
const again = await status();
check(
  again.state === 'done' && JSON.stringify(again.counters) === JSON.stringify(done.counters),
  `after down and up the crawl is still done with the same counters (${JSON.stringify(again.counters)})`,
);
expectExactItems(await storedItems(), 'after down and up');

// 7. down -v: nothing left behind.
await timed('downVolumesSeconds', () => compose(['--profile', 'monitoring', '--profile', 'render', 'down', '-v', '--timeout', '30']));
const leftOver = [...volumes()].filter((v) => !volumesBefore.has(v));
check(leftOver.length === 0, `down -v leaves no volume behind (${leftOver.length} left: ${leftOver.join(' ')})`);

figures.totalSeconds = Number(((performance.now() - started) / 1000).toFixed(1));
mkdirSync(ARTIFACTS, { recursive: true });
writeFileSync(join(ARTIFACTS, 'containers.json'), `${JSON.stringify(figures, null, 2)}\n`);
log(`figures: ${JSON.stringify(figures)}`);
