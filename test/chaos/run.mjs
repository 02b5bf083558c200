#!/usr/bin/env node
// The chaos suite (issue #9): the fleet as separate processes crawls 1,000+ real pages into MongoDB
// (FerretDB) while the harness kills workers, Redis and MongoDB; each crawl must end `done` by itself
// with exactly the ground truth stored.
//
//   node test/chaos/run.mjs            the full form: a clean run, then worker kills, Redis kills,
//                                      a 200 s MongoDB outage, and all of them at once (3 host names)
//   node test/chaos/run.mjs --short    CI's form: all faults at once in one run (2 host names)
//   --scenario NAME (repeatable)       only these scenarios of the form
//
// Environment: CHAOS_SITE (a folder of .html pages; default Debian's python3-doc), FERRETDB_BIN,
// CHAOS_SEED (the random kills' seed), CHAOS_KEEP=1 (keep the run directory even on success).
// Results: test-artifacts/chaos-<form>.json and .md; the run directory (logs of every process, Redis
// AOF, FerretDB data) is kept when a scenario fails. Exit 0 all passed, 1 a scenario failed, 2 bad setup.
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, homedir, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { MongoClient } from 'mongodb';
import { Keys, STAGES } from '@crawlfleet/core';
import { allPartKeys, getDeadLetters, getStatus, loadLayout } from '@crawlfleet/crawl';
import { ROLES, ROOT, runCli, startFleet } from './fleet.mjs';
import { seededRandom } from '../fuzz/schedule.mjs';
import { installCleanup, killAllChildren, mongoAnswers, sleep, startFerretDb, startRedis } from './processes.mjs';
import { markdownReport } from './report.mjs';
import { docsSpider, findSiteRoot, hostNames, pageUrl, serveSite } from './site.mjs';
import { verify } from './verify.mjs';

/** The scenarios. Progress points are fractions of the crawl's expected fetches or items. */
const FULL = {
  hosts: 3,
  scenarios: [
    { name: 'clean', workerKills: false, redisKills: 0, mongoOutageS: 0, writerKillsInOutage: 0 },
    { name: 'worker-kills', workerKills: true, redisKills: 0, mongoOutageS: 0, writerKillsInOutage: 0 },
    { name: 'redis-kills', workerKills: false, redisKills: 2, mongoOutageS: 0, writerKillsInOutage: 0 },
    { name: 'mongo-outage', workerKills: false, redisKills: 0, mongoOutageS: 200, writerKillsInOutage: 2 },
    { name: 'all-at-once', workerKills: true, redisKills: 2, mongoOutageS: 200, writerKillsInOutage: 2 },
  ],
};
const SHORT = {
  hosts: 2,
  // Worker kills for the crawl's first 75 s only, so that CI's run takes about 4 minutes.
  // With WARC output (issue #21): the archive must come out exactly once through the same faults.
  scenarios: [{ name: 'short-all-at-once', workerKills: true, workerKillWindowS: 75, redisKills: 1, mongoOutageS: 35, writerKillsInOutage: 1, warc: true }],
};
// The first fetcher parses its pages itself (PARSE_IN_FETCHER=1), the second hands them to the parsers:
// a fleet midway through switching, whose pages take either path and must come out exactly once.
const FLEET = { counts: { fetcher: 2, parser: 2, writer: 2 }, concurrency: { fetcher: 8 }, slotEnv: { fetcher: [{ PARSE_IN_FETCHER: '1' }] } };
/** A crawl that makes no progress for this long (outside an outage) is declared hung. */
const STALL_S = 180;

const args = process.argv.slice(2);
const form = args.includes('--short') ? 'short' : 'full';
const only = args.flatMap((a, i) => (a === '--scenario' ? [args[i + 1]] : []));
const plan = form === 'short' ? SHORT : FULL;
const scenarios = only.length ? plan.scenarios.filter((s) => only.includes(s.name)) : plan.scenarios;
if (only.length && scenarios.length !== only.length) {
  process.stderr.write(`chaos: unknown scenario in ${only.join(', ')}; the ${form} form has ${plan.scenarios.map((s) => s.name).join(', ')}\n`);
  process.exit(2);
}

const started = Date.now();
const stamp = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s`;
const say = (line) => process.stdout.write(`[chaos ${stamp()}] ${line}\n`);

// mulberry32 (test/fuzz/schedule.mjs): the random kills can be replayed with CHAOS_SEED.
const seed = Number(process.env.CHAOS_SEED ?? Math.floor(Math.random() * 2 ** 31));
const random = seededRandom(seed);

/** The ground truth, by Python's html.parser over the files: every page's title and the broken links. */
async function groundTruth(root, hosts, port) {
  const { stdout } = await promisify(execFile)('python3', [join(import.meta.dirname, 'site_truth.py'), root], { maxBuffer: 64 * 1024 * 1024 });
  const found = JSON.parse(stdout);
  if (found.untitled.length) throw new Error(`pages without a <title> in ${root}: ${found.untitled.join(', ')} (the spider's title is required)`);
  const pages = new Map();
  const dead = new Set();
  for (const host of hosts) {
    for (const [path, title] of Object.entries(found.pages)) pages.set(pageUrl(host, port, path), title);
    for (const path of found.brokenLinks) dead.add(pageUrl(host, port, path));
  }
  return { pages, dead, pagesPerHost: Object.keys(found.pages).length, brokenPerHost: found.brokenLinks.length };
}

/** The crawl's state and counters (every partition's), or undefined while Redis does not answer. */
async function readProgress(redis, keys, crawlId) {
  try {
    const status = await getStatus(redis, keys, crawlId);
    return status ? { state: status.state, counters: status.counters } : undefined;
  } catch {
    return undefined;
  }
}

/** The ids left in the crawl's sets, every partition's together. */
async function leftoverSets(redis, keys, crawlId) {
  const layout = await loadLayout(redis, keys, crawlId);
  const out = {};
  for (const set of ['pending', 'active', 'delayed', 'parked']) {
    out[set] = {};
    for (const stage of STAGES) out[set][stage] = (await Promise.all(allPartKeys(keys, layout).map((k) => redis.smembers(k[set][stage])))).flat();
  }
  return out;
}

/** For a crawl that did not end: what BullMQ holds for the ids still pending. */
async function diagnosePending(redisUrl, keys, leftovers) {
  const out = {};
  for (const stage of STAGES) {
    const ids = leftovers.pending[stage].slice(0, 20);
    if (!ids.length) continue;
    const queue = new Queue(stage, { connection: { url: redisUrl, maxRetriesPerRequest: 1 }, prefix: keys.queuePrefix(stage) });
    try {
      out[stage] = await Promise.all(ids.map(async (id) => ({ id, bullmqState: await queue.getJobState(id) })));
      out[`${stage}Counts`] = await queue.getJobCounts();
    } finally {
      await queue.close();
    }
  }
  return out;
}

/**
 * The newest modification time of the fleet's built code: in a shared checkout, a rebuild during a
 * scenario makes restarted workers run other code than the ones they replace (the report says so).
 */
function buildStamp() {
  let newest = 0;
  for (const group of ['packages', 'services']) {
    for (const name of readdirSync(join(ROOT, group))) {
      const dist = join(ROOT, group, name, 'dist');
      if (!existsSync(dist)) continue;
      for (const file of readdirSync(dist, { recursive: true })) {
        if (String(file).endsWith('.js')) newest = Math.max(newest, statSync(join(dist, String(file))).mtimeMs);
      }
    }
  }
  return newest;
}

async function runScenario(scenario, ctx) {
  const { redis, mongo, site, truth, hosts, runDir } = ctx;
  const ts = Date.now().toString(36);
  const prefix = `chaos-${scenario.name}-${ts}`;
  const crawlId = `chaos-${scenario.name}-${ts}`;
  const dbName = `chaos_${scenario.name.replace(/-/g, '_')}_${ts}`;
  const dir = join(runDir, scenario.name);
  mkdirSync(dir, { recursive: true });
  const env = {
    ...process.env,
    REDIS_URL: redis.url,
    QUEUE_PREFIX: prefix,
    MONGO_URL: `${mongo.url}${dbName}`,
    HOST_RESOLVE: hosts.map((h) => `${h}:127.0.0.1`).join(','),
    LOCK_DURATION_MS: '10000',
    LOG_LEVEL: 'info',
    // Four partitions (unless told otherwise): the crawl's completion across partitions is what the
    // faults must not break, as on a Redis Cluster.
    FRONTIER_PARTITIONS: process.env.FRONTIER_PARTITIONS ?? '4',
  };
  const keys = new Keys(prefix);
  const events = [];
  const log = (line) => {
    events.push({ at: new Date().toISOString(), line });
    say(`${scenario.name}: ${line}`);
  };

  writeFileSync(join(dir, 'spider.json'), JSON.stringify(docsSpider(hosts, site.port), null, 2));
  writeFileSync(join(dir, 'urls.txt'), `${[...truth.pages.keys()].join('\n')}\n`);
  const warcDir = join(dir, 'warc');
  // 4 MB files: the archive (about 20 MB) rolls over several times while writers are killed
  const warcArgs = scenario.warc ? ['--warc', warcDir, '--warc-rollover', '4000000'] : [];
  const seeded = await runCli(['seed', join(dir, 'spider.json'), '--crawl-id', crawlId, '--sink', 'mongo', '--urls-file', join(dir, 'urls.txt'), ...warcArgs], env);
  if (seeded.code !== 0) throw new Error(`seed exited ${seeded.code}: ${seeded.stderr.slice(-2000)}`);
  log(`seeded ${truth.pages.size} pages as crawl ${crawlId} (QUEUE_PREFIX ${prefix}, MongoDB database ${dbName})`);

  const buildAtStart = buildStamp();
  const t0 = Date.now();
  const fleet = startFleet({ env, logDir: dir, counts: FLEET.counts, concurrency: FLEET.concurrency, slotEnv: FLEET.slotEnv, log });
  const watcher = new Redis(redis.url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, retryStrategy: () => 200 });
  watcher.on('error', () => undefined);
  const injected = { kills: Object.fromEntries(ROLES.map((r) => [r, 0])), redisKills: 0, redisRestarts: [], mongoOutageS: 0, writerKillsInOutage: 0 };
  const expectedFetches = truth.pages.size + truth.dead.size;
  let progress = { state: 'running', counters: {} };
  let done = false;
  let outageOn = false;
  const faults = [];

  // kill -9 of a random fetcher, parser or writer every 1-2 s, restarted at once.
  if (scenario.workerKills) {
    faults.push(
      (async () => {
        while (!done) {
          await sleep(1000 + random() * 1000);
          if (done) break;
          if (scenario.workerKillWindowS && Date.now() - t0 > scenario.workerKillWindowS * 1000) break;
          const roles = fleet.readyRoles();
          if (roles.length === 0) continue;
          const role = roles[Math.floor(random() * roles.length)];
          const killed = await fleet.killAndRestart(role, random);
          if (killed) {
            injected.kills[role]++;
            events.push({ at: new Date().toISOString(), line: `kill -9 ${role}-${killed.slot} (pid ${killed.pid})` });
          }
        }
      })(),
    );
  }
  // kill -9 of Redis at points of the fetch progress; restarted from its AOF a second later.
  if (scenario.redisKills) {
    const points = scenario.redisKills === 1 ? [0.4] : Array.from({ length: scenario.redisKills }, (_, i) => 0.25 + (0.5 * i) / (scenario.redisKills - 1));
    faults.push(
      (async () => {
        for (const point of points) {
          while (!done && ((progress.counters.fetched ?? 0) + (progress.counters.failed ?? 0)) / expectedFetches < point) await sleep(100);
          if (done) break;
          const before = await watcher.dbsize().catch(() => null);
          await redis.kill9();
          injected.redisKills++;
          log(`kill -9 Redis at ${Math.round(point * 100)}% of the fetches (${before} keys)`);
          await sleep(1000);
          await redis.start();
          let after = null;
          for (let i = 0; i < 50 && after === null; i++) after = await watcher.dbsize().catch(() => sleep(100).then(() => null));
          injected.redisRestarts.push({ keysBefore: before, keysAfterAofReplay: after });
          log(`Redis restarted from its AOF: ${after} keys`);
        }
      })(),
    );
  }
  // A MongoDB outage once 5% of the items are written, with writer kills spread over it.
  if (scenario.mongoOutageS) {
    faults.push(
      (async () => {
        while (!done && (progress.counters.written ?? 0) < truth.pages.size * 0.05) await sleep(100);
        if (done) return;
        await mongo.stop();
        outageOn = true;
        const outageStart = Date.now();
        log(`MongoDB stopped for ${scenario.mongoOutageS} s (${progress.counters.written} items written)`);
        const endAt = outageStart + scenario.mongoOutageS * 1000;
        for (let i = 1; i <= scenario.writerKillsInOutage; i++) {
          const killAt = outageStart + (scenario.mongoOutageS * 1000 * i) / (scenario.writerKillsInOutage + 1);
          while (!done && Date.now() < killAt) await sleep(100);
          if (done) break;
          let killed;
          while (!done) {
            killed = await fleet.killAndRestart('writer', random);
            if (killed) break;
            await sleep(200);
          }
          if (!killed) break;
          injected.writerKillsInOutage++;
          log(`kill -9 writer-${killed.slot} during the outage; restarted at once`);
        }
        while (!done && Date.now() < endAt) await sleep(100);
        if (done) log('the crawl says done while MongoDB is down');
        await mongo.start();
        outageOn = false;
        injected.mongoOutageS = Math.round((Date.now() - outageStart) / 1000);
        log(`MongoDB back after ${injected.mongoOutageS} s`);
      })(),
    );
  }

  // Wait for `done`, decided by the fleet itself; give up when nothing moves for STALL_S.
  let lastSum = -1;
  let lastMove = Date.now();
  let lastReport = 0;
  let endedDone = false;
  let countersAtDone = null;
  for (;;) {
    const p = await readProgress(watcher, keys, crawlId);
    if (p) progress = p;
    const c = progress.counters;
    const sum = ['seen', 'fetched', 'parsed', 'items', 'written', 'failed'].reduce((s, n) => s + (c[n] ?? 0), 0);
    if (sum !== lastSum || outageOn) {
      lastSum = sum;
      lastMove = Date.now();
    }
    if (Date.now() - lastReport > 10_000) {
      lastReport = Date.now();
      log(`state ${progress.state}: fetched ${c.fetched ?? 0}, parsed ${c.parsed ?? 0}, written ${c.written ?? 0}, failed ${c.failed ?? 0}${c.reconciled ? `, reconciled ${c.reconciled}` : ''}`);
    }
    if (p && (p.state === 'done' || p.state === 'failed' || p.state === 'cancelled')) {
      endedDone = p.state === 'done';
      countersAtDone = p.counters;
      log(`the crawl ended ${p.state} after ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      break;
    }
    if (Date.now() - lastMove > STALL_S * 1000) {
      log(`no progress for ${STALL_S} s: the crawl is hung (state ${progress.state})`);
      break;
    }
    await sleep(500);
  }
  done = true;
  await Promise.all(faults);
  const durationS = Math.round((Date.now() - t0) / 1000);

  // Let late effects land (they would show as counters moved after done), then stop the fleet.
  await sleep(3000);
  await fleet.stop();
  const final = await readProgress(watcher, keys, crawlId);
  const status = await runCli(['status', '--crawl-id', crawlId, '--json'], env);
  const statusJson = status.code === 0 ? JSON.parse(status.stdout) : null;
  const waited = endedDone ? await runCli(['wait', '--crawl-id', crawlId, '--timeout', '5'], env, 30_000) : { code: null };
  const deadLetters = Object.entries(await getDeadLetters(watcher, keys, crawlId)).map(([id, record]) => {
    const { url, stage, code, reason, attempts, at } = record;
    return { id, url, stage, code, reason, attempts, at };
  });
  const leftovers = await leftoverSets(watcher, keys, crawlId);
  const diagnosis = endedDone ? undefined : await diagnosePending(redis.url, keys, leftovers);
  watcher.disconnect();

  const client = await MongoClient.connect(env.MONGO_URL, { serverSelectionTimeoutMS: 30_000 });
  const stored = await client
    .db()
    .collection('page')
    .find({}, { projection: { _id: 1, url: 1, title: 1, firstSeenAt: 1, lastSeenAt: 1 } })
    .toArray();
  await client.close();

  const warcRead = scenario.warc ? readWarc(warcDir) : undefined;
  const found = verify({
    truth,
    stored,
    deadLetters,
    endedDone,
    finalState: final?.state ?? progress.state,
    countersAtDone,
    countersFinal: statusJson?.counters ?? final?.counters ?? null,
    leftovers,
    waitExit: waited.code,
    ...(warcRead ? { warc: warcRead } : {}),
  });
  found.endedDone = endedDone;
  found.buildChanged = buildStamp() !== buildAtStart;
  if (found.buildChanged) log('the fleet was rebuilt during this scenario: restarted workers ran newer code than the first ones');
  found.finalState = final?.state ?? progress.state;
  log(found.pass ? 'PASS' : `FAIL: ${found.problems.join('; ')}`);
  return {
    name: scenario.name,
    crawlId,
    queuePrefix: prefix,
    mongoDatabase: dbName,
    logs: dir,
    durationS,
    ...(warcRead ? { warcFiles: warcRead.files } : {}),
    injected: { ...injected, unexpectedExits: fleet.unexpectedExits.length, unexpectedExitList: fleet.unexpectedExits, workerStarts: fleet.starts },
    found,
    status: statusJson,
    deadLetters,
    diagnosis,
    events,
  };
}

/**
 * The archive as python's warcio reads it (WARC_TOOLS, scripts/services.sh ensure_warc_tools): each
 * file checked, and the target URI of every response and revisit record.
 */
function readWarc(dir) {
  const tools = process.env.WARC_TOOLS;
  if (!tools) throw new Error('WARC_TOOLS is not set: scripts/test.sh and scripts/chaos.sh install warcio (ensure_warc_tools)');
  const files = existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => f.endsWith('.warc.gz'))
        .sort()
        .map((f) => join(dir, f))
    : [];
  const invalidFiles = [];
  for (const file of files) {
    const check = spawnSync(join(tools, 'warcio'), ['check', file], { encoding: 'utf8' });
    if (check.status !== 0) invalidFiles.push({ file, reason: `${check.stdout}${check.stderr}`.slice(0, 2000) });
  }
  const read = spawnSync(join(tools, 'python'), [join(ROOT, 'test', 'fixtures', 'reference', 'warc_records.py'), ...files], { encoding: 'utf8', maxBuffer: 512 * 1024 * 1024 });
  if (read.status !== 0) throw new Error(`warc_records.py exited ${read.status}: ${read.stderr.slice(-2000)}`);
  const captures = JSON.parse(read.stdout)
    .filter((r) => r.type === 'response' || r.type === 'revisit')
    .map((r) => ({ uri: r.uri }));
  return { captures, invalidFiles, files: files.length };
}

async function main() {
  let siteRoot;
  try {
    siteRoot = findSiteRoot();
  } catch (err) {
    process.stderr.write(`chaos: ${err.message}\n`);
    process.exit(err.exitCode ?? 2);
  }
  if (!existsSync(join(ROOT, 'services', 'cli', 'dist', 'main.js'))) {
    process.stderr.write('chaos: the fleet is not built; run npm run build\n');
    process.exit(2);
  }
  const ferretBin = process.env.FERRETDB_BIN ?? join(homedir(), '.cache', 'crawlfleet', 'ferretdb-v1.24.2', 'ferretdb');
  if (!existsSync(ferretBin)) {
    process.stderr.write(`chaos: FerretDB not found at ${ferretBin}; set FERRETDB_BIN (scripts/test.sh builds it)\n`);
    process.exit(2);
  }
  const runDir = mkdtempSync(join(tmpdir(), 'crawlfleet-chaos-'));
  let site;
  installCleanup(async () => site?.close());
  say(`${form} form: ${scenarios.map((s) => s.name).join(', ')}; seed ${seed}; run directory ${runDir}`);
  const results = [];
  let failed = false;
  try {
    site = await serveSite(siteRoot);
    const hosts = hostNames(plan.hosts);
    const [truth, redis, mongo] = await Promise.all([groundTruth(siteRoot, hosts, site.port), startRedis(join(runDir, 'redis')), startFerretDb(ferretBin, join(runDir, 'ferretdb'), mongoAnswers)]);
    say(
      `site ${siteRoot}: ${truth.pagesPerHost} pages × ${hosts.length} hosts = ${truth.pages.size} pages on 127.0.0.1:${site.port}; ${truth.dead.size} broken links (404); Redis ${redis.url} (AOF); FerretDB ${mongo.url}`,
    );
    for (const scenario of scenarios) {
      const result = await runScenario(scenario, { redis, mongo, site, truth, hosts, runDir });
      results.push(result);
      failed ||= !result.found.pass;
    }
    const meta = {
      form,
      date: new Date().toISOString(),
      site: siteRoot,
      pagesPerHost: truth.pagesPerHost,
      hosts: hosts.length,
      fleet: `${FLEET.counts.fetcher} fetchers (concurrency ${FLEET.concurrency.fetcher}; the first with PARSE_IN_FETCHER=1), ${FLEET.counts.parser} parsers, ${FLEET.counts.writer} writers, LOCK_DURATION_MS 10000`,
      machine: `${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB`,
      seed,
    };
    const md = markdownReport(results, meta);
    const artifacts = join(ROOT, 'test-artifacts');
    mkdirSync(artifacts, { recursive: true });
    writeFileSync(join(artifacts, `chaos-${form}.json`), JSON.stringify({ meta, results }, null, 2));
    writeFileSync(join(artifacts, `chaos-${form}.md`), md);
    process.stdout.write(`\n${md}\nresults: test-artifacts/chaos-${form}.json and .md\n`);
  } catch (err) {
    failed = true;
    process.stderr.write(`chaos: ${err?.stack ?? err}\n`);
  } finally {
    await site?.close();
    await killAllChildren();
  }
  if (failed || process.env.CHAOS_KEEP === '1') say(`kept the run directory (logs, AOF, FerretDB data): ${runDir}`);
  else rmSync(runDir, { recursive: true, force: true });
  process.exit(failed ? 1 : 0);
}

await main();
