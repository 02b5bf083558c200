#!/usr/bin/env node
// The lifecycle fuzzer (issue #28, section C): each seed draws a schedule of operations (seed, re-seed,
// pause, resume, cancel, reset, replay, recrawl, gc, through the real CLI), faults (kill -9 of any
// worker or renderer, Redis kill -9 and restart from its AOF, a MongoDB outage, a skewed clock, a slow
// or hostile site) and features (partitions, fetchers that parse beside ones that do not, renderers,
// WARC, cross-host redirects plain and in the browser), runs it against a real fleet, and checks the
// invariants along the way and at the end (docs/fuzzing.md).
//
//   node test/fuzz/run.mjs --short           CI's form: a fixed small set of seeds
//   node test/fuzz/run.mjs --minutes N       new seeds until N minutes are up, a summary at the end
//   node test/fuzz/run.mjs --seed S [...]    these seeds (a failing seed replays its schedule);
//                                            S:short or S:long names the mix it draws from
//   --form short|long                        the mix of seeds that do not name theirs (default:
//                                            short with --short, long otherwise)
//   --keep                                   keep the run directory even when every schedule passed
// With --minutes N and --seed, the seeds run first, then new ones until the time is up.
//
// Exit 0 when every schedule held every invariant, 1 when one did not, 2 for a bad setup.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { MongoClient } from 'mongodb';
import { Keys, STAGES } from '@crawlfleet/core';
import { allPartKeys, getDeadLetters, getStatus, loadLayout } from '@crawlfleet/crawl';
import { ROOT, runCli } from '../chaos/fleet.mjs';
import { freePort, installCleanup, killAllChildren, mongoAnswers, sleep, startFerretDb, startRedis } from '../chaos/processes.mjs';
import { readWarcDir, chromiumProcessesUnder } from './probes.mjs';
import { startFuzzFleet } from './fleet.mjs';
import { checkEnd, checkProgress, checkResources } from './invariants.mjs';
import { describeConfig, describeStep, drawSchedule, seededRandom } from './schedule.mjs';
import { fuzzSpider, serveModel, siteModel } from './site.mjs';

/**
 * CI's seeds: fixed, so that the short form runs the same schedules every time. Between them they mix
 * renderers, browser and plain cross-host redirects, WARC, 4 and 16 partitions, fetchers that parse
 * beside ones that do not, a skewed clock, a MongoDB outage, Redis kill -9, writer kills, pause/resume,
 * re-seeds, replay, reset, cancel, recrawl and gc (docs/fuzzing.md).
 */
export const SHORT_SEEDS = [309, 1652];
const BOUNDS = { rssBytes: 1024 * 2 ** 20, redisBytes: 256 * 2 ** 20 };
const ENDED = new Set(['done', 'failed', 'cancelled']);
const WORK = ['seen', 'fetched', 'redirected', 'parsed', 'items', 'written', 'failed', 'replayed'];
const OPENS = new Set(['reseed', 'replay', 'recrawl', 'reset', 'cancel', 'resume', 'pause', 'pause-left']);

const args = process.argv.slice(2);
const argValue = (name) => args.flatMap((a, i) => (a === name ? [args[i + 1]] : []));
const short = args.includes('--short');
const minutes = Number(argValue('--minutes')[0] ?? 0);
// `--seed S` or `--seed S:short` (that seed drawn from the short mix)
const chosenSeeds = argValue('--seed').map((a) => ({ seed: Number(a.split(':')[0]), form: a.split(':')[1] }));
const form = argValue('--form')[0] ?? (short ? 'short' : 'long');
const keep = args.includes('--keep') || process.env.FUZZ_KEEP === '1';
const STALL_S = form === 'short' ? 90 : 150;

const started = Date.now();
const stamp = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(7)}s`;
const say = (line) => process.stdout.write(`[fuzz ${stamp()}] ${line}\n`);

/** One schedule's run: its fleet, its crawl, its checks. Returns its violations. */
async function runSchedule(schedule, ctx) {
  const { seed, config } = schedule;
  const violations = [];
  let current = 'setup';
  const tag = (line) => say(`seed ${seed}: ${line}`);
  const violate = (what) => {
    violations.push({ seed, step: current, what });
    tag(`VIOLATION at ${current}: ${what}`);
  };
  const dir = join(ctx.runDir, `seed-${seed}`);
  mkdirSync(dir, { recursive: true });
  // The workers' TMPDIR, short: a renderer puts its Chromium directory under TMPDIR only while
  // Chromium's socket paths fit there (else under /tmp, where the checks below would not look). A
  // link in the seed's directory points to it, so a kept run directory shows what was left.
  const runTmp = mkdtempSync(join(tmpdir(), 'cf-t-'));
  symlinkSync(runTmp, join(dir, 'tmp'));
  const port = await freePort();
  const model = siteModel(config, port);
  const site = await serveModel(model, config, port);
  const crawlId = `fuzz-${seed}-${Date.now().toString(36)}`;
  const prefix = `fz${seed}-${Date.now().toString(36)}`;
  const env = {
    ...process.env,
    REDIS_URL: ctx.redis.url,
    QUEUE_PREFIX: prefix,
    MONGO_URL: `${ctx.mongo.url}fuzz_${seed}_${Date.now().toString(36)}`,
    HOST_RESOLVE: model.hosts.map((h) => `${h}:127.0.0.1`).join(','),
    LOCK_DURATION_MS: '10000',
    LOG_LEVEL: 'info',
    FRONTIER_PARTITIONS: String(config.partitions),
    // the renderers' Chromium profiles and artifacts go here: what is left after the fleet stops is seen
    TMPDIR: runTmp,
  };
  delete env.NODE_OPTIONS;
  const keys = new Keys(prefix);
  const spiderFile = join(dir, 'spider.json');
  writeFileSync(spiderFile, JSON.stringify(fuzzSpider(model, config, port), null, 2));
  const warcDir = join(dir, 'warc');
  const seedArgs = (urls = []) => ['seed', spiderFile, '--crawl-id', crawlId, '--sink', 'mongo', ...(config.warc ? ['--warc', warcDir] : []), ...urls];
  const cli = async (argv, timeoutMs = 120_000) => {
    const r = await runCli(argv, env, timeoutMs);
    tag(`  crawlfleet ${argv[0]}: exit ${r.code}${r.code ? ` ${r.stderr.trim().split('\n').slice(-1)[0]?.slice(0, 300)}` : ''}`);
    return r;
  };

  // The expectation, updated as the operations run.
  const expect = {
    state: 'done',
    runItems: new Map(model.items),
    sinkItems: new Map(model.items),
    dead: model.dead,
    exact: true,
    resetHappened: false,
    runs: 1,
    replays: 0,
    plainFetched: new Set(model.plainFetched),
  };
  const orphansLeft = [...model.orphans];
  const reseedOrphans = async () => {
    const batch = orphansLeft.splice(0, Math.max(1, Math.ceil(orphansLeft.length / 2)));
    if (batch.length === 0) return;
    const r = await cli(seedArgs(batch.map((o) => o.url)));
    if (r.code === 0) {
      for (const o of batch) {
        expect.runItems.set(o.url, o.title);
        expect.sinkItems.set(o.url, o.title);
        expect.plainFetched.add(o.url);
      }
    } else if (r.code !== 2) violate(`re-seed exited ${r.code}: ${r.stderr.slice(-300)}`);
  };

  const seeded = await cli(seedArgs());
  if (seeded.code !== 0) throw new Error(`seed exited ${seeded.code}: ${seeded.stderr.slice(-1000)}`);

  const skewSteps = schedule.steps.filter((s) => s.op === 'skew');
  const slotEnv = { fetcher: config.parseInFetcher.map((p) => (p ? { PARSE_IN_FETCHER: '1' } : {})) };
  for (const s of skewSteps) {
    slotEnv[s.role] ??= [];
    slotEnv[s.role][0] = { ...slotEnv[s.role][0], NODE_OPTIONS: `--import=${pathToFileURL(join(import.meta.dirname, 'skew.mjs')).href}`, FUZZ_CLOCK_SKEW_MS: String(s.ms) };
    tag(describeStep(s));
  }
  const counts = { fetcher: config.fetchers, parser: config.parsers, writer: config.writers, renderer: config.renderers };
  const fleet = startFuzzFleet({ env, logDir: dir, counts, slotEnv, log: tag });
  const watcher = new Redis(ctx.redis.url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, retryStrategy: () => 200 });
  watcher.on('error', () => undefined);
  const random = seededRandom(seed ^ 0x5eed);

  // The monitor: a reading every 250 ms, the along-the-way invariants on each pair of readings.
  let reading;
  // An operation that may move counters back or reopen the crawl: until a reading after it ended.
  let openUntil = 0;
  let outage = false;
  let lastMove = Date.now();
  let monitorOn = true;
  let lastSum = -1;
  const peak = { rss: 0, redis: 0 };
  const monitor = (async () => {
    let n = 0;
    while (monitorOn) {
      const r = await getStatus(watcher, keys, crawlId).catch(() => undefined);
      if (r) {
        const cur = { state: r.state, counters: r.counters ?? {} };
        for (const v of checkProgress(reading, cur, { opened: Date.now() < openUntil })) violate(v);
        // progress is work: the reconciler rebuilding the same job for ever (`reconciled`) or jobs
        // parked again and again (`deferred`) are not
        const sum = WORK.reduce((a, name) => a + (Number(cur.counters[name]) || 0), 0) + cur.state.length;
        if (sum !== lastSum || outage || (cur.state === 'paused' && Date.now() < openUntil)) {
          lastSum = sum;
          lastMove = Date.now();
        }
        reading = cur;
      }
      if (++n % 20 === 0) {
        const rssByProcess = fleet.rss();
        const info = await watcher.info('memory').catch(() => '');
        const redisUsedBytes = Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
        peak.rss = Math.max(peak.rss, ...Object.values(rssByProcess), 0);
        peak.redis = Math.max(peak.redis, redisUsedBytes);
        for (const v of checkResources({ rssByProcess, redisUsedBytes }, BOUNDS)) violate(v);
      }
      await sleep(250);
    }
  })();
  const expectedFetches = model.items.size + model.dead.size + config.redirects * config.hosts;
  const progress = () => {
    const c = reading?.counters ?? {};
    // a 404 is fetched (and failed); a cross-host redirect is counted redirected
    return ((c.fetched ?? 0) + (c.redirected ?? 0)) / expectedFetches;
  };
  const ended = () => reading && ENDED.has(reading.state);
  const stalled = () => Date.now() - lastMove > STALL_S * 1000;

  /** Waits until the crawl ends (or, with `orPaused`, is paused); false when it stalls. */
  const waitEnd = async (orPaused = false) => {
    lastMove = Date.now();
    await sleep(1500);
    for (;;) {
      if (ended() || (orPaused && reading?.state === 'paused')) return true;
      if (stalled()) {
        violate(`the crawl did not end by itself: no progress for ${STALL_S} s (state ${reading?.state}, counters ${JSON.stringify(reading?.counters)})`);
        return false;
      }
      await sleep(500);
    }
  };

  const background = [];
  const ops = {
    kills: async (s) => {
      background.push(
        (async () => {
          for (let i = 0; i < s.count && !ended(); i++) {
            const roles = s.role === 'any' ? fleet.roles() : [s.role];
            const role = roles[Math.floor(random() * roles.length)];
            const k = await fleet.killAndRestart(role, random);
            if (k) tag(`  kill -9 ${k.role}-${k.slot} (pid ${k.pid})`);
            await sleep(s.everyMs);
          }
        })(),
      );
    },
    'redis-kill': async (s) => {
      await ctx.redis.kill9();
      await sleep(s.downMs);
      await ctx.redis.start();
      tag(`  Redis restarted from its AOF after ${s.downMs} ms`);
    },
    'mongo-outage': async (s) => {
      outage = true;
      await ctx.mongo.stop();
      background.push(
        (async () => {
          await sleep(s.seconds * 1000);
          await ctx.mongo.start();
          outage = false;
          tag(`  MongoDB back after ${s.seconds} s`);
        })(),
      );
    },
    skew: async () => undefined,
    pause: async (s) => {
      await cli(['pause', '--crawl-id', crawlId]);
      await sleep(s.resumeAfterMs);
      await cli(['resume', '--crawl-id', crawlId]);
    },
    'pause-left': async () => {
      const r = await cli(['pause', '--crawl-id', crawlId]);
      if (r.code === 0 && reading?.state !== 'done') expect.pausedLeft = true;
    },
    reseed: reseedOrphans,
    gc: async () => {
      await cli(['gc', '--finished-before', '0s', '--quiet']);
      const st = await getStatus(watcher, keys, crawlId).catch(() => undefined);
      if (st?.collected) {
        expect.collected = true;
        tag(`  gc collected the crawl (state ${st.state} when collected)`);
        if (!ENDED.has(st.state)) violate(`gc collected a crawl in state ${st.state}`);
      }
    },
    replay: async () => {
      const r = await cli(['replay', '--crawl-id', crawlId]);
      if (r.code === 0) expect.replays++;
    },
    status: async () => {
      const r = await cli(['status', '--crawl-id', crawlId, '--json']);
      if (r.code !== 0) violate(`status exited ${r.code}`);
    },
    cancel: async (s) => {
      await cli(['cancel', '--crawl-id', crawlId]);
      if (!s.thenReset) {
        expect.state = 'cancelled';
        expect.exact = false;
        return;
      }
      await ops.reset();
    },
    reset: async () => {
      const r = await cli(['reset', '--crawl-id', crawlId]);
      if (r.code !== 0) return violate(`reset exited ${r.code}: ${r.stderr.slice(-300)}`);
      const again = await cli(seedArgs());
      if (again.code !== 0) return violate(`seed after reset exited ${again.code}: ${again.stderr.slice(-300)}`);
      // the new run fetches the start URLs' pages; orphans seeded before the reset may never have been
      expect.runItems = new Map(model.items);
      expect.plainFetched = new Set(model.plainFetched);
      expect.resetHappened = true;
      expect.runs++;
      expect.state = 'done';
      expect.exact = true;
      orphansLeft.splice(0, orphansLeft.length, ...model.orphans);
    },
    recrawl: async () => {
      const r = await cli(['recrawl', '--crawl-id', crawlId]);
      if (r.code === 0) {
        expect.runs++;
        expect.recrawled = true;
      }
    },
  };

  const runStep = async (s) => {
    current = describeStep(s);
    tag(`${current} (progress ${Math.round(progress() * 100)}%, state ${reading?.state})`);
    if (OPENS.has(s.op)) openUntil = Number.POSITIVE_INFINITY;
    await ops[s.op](s);
    if (OPENS.has(s.op)) openUntil = Date.now() + 2000;
  };

  try {
    for (const s of schedule.steps.filter((x) => x.at !== 'end' && x.op !== 'skew')) {
      while (progress() < s.at && !ended() && !stalled()) await sleep(200);
      if (expect.collected) break;
      await runStep(s);
    }
    await Promise.all(background);
    let ok = expect.collected || (await waitEnd(expect.pausedLeft));
    if (ok && expect.pausedLeft && reading?.state === 'paused') {
      current = 'the pause left in place';
      const before = JSON.stringify(reading.counters);
      await sleep(8000);
      if (reading.state !== 'paused') violate(`a paused crawl went ${reading.state} by itself`);
      else if (JSON.stringify(reading.counters) !== before) violate(`a paused crawl kept working: ${before} → ${JSON.stringify(reading.counters)}`);
      openUntil = Number.POSITIVE_INFINITY;
      await cli(['resume', '--crawl-id', crawlId]);
      openUntil = Date.now() + 2000;
      ok = await waitEnd();
    }
    for (const s of schedule.steps.filter((x) => x.at === 'end')) {
      if (!ok || expect.collected || reading?.state !== 'done') break;
      await runStep(s);
      if (!expect.collected) ok = await waitEnd();
    }
    current = 'the end';
    await sleep(3000);
    await endChecks({ ctx, watcher, keys, crawlId, expect, fleet, runTmp, warcDir, config, env, violate, readingAtEnd: reading, tag });
  } finally {
    monitorOn = false;
    await monitor;
    await fleet.stop();
    watcher.disconnect();
    await site.close();
  }
  tag(`peak worker RSS ${Math.round(peak.rss / 2 ** 20)} MiB, peak Redis ${Math.round(peak.redis / 2 ** 20)} MiB; ${fleet.unexpectedExits.length} workers exited by themselves`);
  return violations;
}

/** The end: jobs, sets and leases drained; the fleet stopped; what it left; the sink and the archive. */
async function endChecks({ ctx, watcher, keys, crawlId, expect, fleet, runTmp, warcDir, config, env, violate, readingAtEnd, tag }) {
  const status = await getStatus(watcher, keys, crawlId);
  const finalState = status?.state;
  const moved = checkProgress(readingAtEnd, { state: finalState, counters: status?.counters ?? {} }, { opened: false });
  for (const v of moved) violate(`in the 3 s after the end: ${v}`);
  const deadLetters = status?.collected ? [] : Object.values(await getDeadLetters(watcher, keys, crawlId)).map(({ url, code, reason }) => ({ url, code, reason }));
  // A killed worker's jobs and leases lapse on their own: give them a lock's time to.
  const queuedJobs = await drained(() => queuedJobCounts(ctx.redis.url, keys), 45_000);
  const leasesHeld = await drained(() => liveLeases(watcher, keys.prefix), 45_000);
  const leftoverSets = status?.collected ? {} : await leftovers(watcher, keys, crawlId);
  await fleet.stop();
  await sleep(2000);
  const chromiumLeft = chromiumProcessesUnder(runTmp);
  const tempLeft = tempLeftIn(runTmp);
  if (tempLeft.length === 0) rmSync(runTmp, { recursive: true, force: true });
  const client = await MongoClient.connect(env.MONGO_URL, { serverSelectionTimeoutMS: 60_000 });
  const stored = await client
    .db()
    .collection('page')
    .find({}, { projection: { _id: 0, url: 1, title: 1 } })
    .toArray();
  await client.close();
  const warc = config.warc ? readWarcDir(warcDir) : undefined;
  const expectation = {
    state: expect.collected ? (status?.state ?? 'done') : expect.state,
    items: expect.state === 'done' ? expect.runItems : undefined,
    dead: expect.dead,
    exact: expect.exact && expect.state === 'done' && !expect.recrawled,
    writtenIsSink: !expect.resetHappened && !expect.recrawled,
    runs: expect.runs,
    replays: expect.replays,
    plainFetched: expect.plainFetched,
  };
  const seen = {
    finalState,
    counters: status?.counters,
    collected: Boolean(status?.collected),
    stored: filterSink(stored, expect),
    deadLetters,
    queuedJobs,
    leftoverSets,
    leasesHeld,
    warc,
    chromiumLeft,
    tempLeft,
  };
  // After a reset the sink also holds the items of the runs before it; `written` counts this run's.
  if (expect.resetHappened) {
    const extra = stored.filter((d) => !expect.sinkItems.has(d.url)).map((d) => d.url);
    if (extra.length) violate(`items in the sink that the site does not have: ${extra.slice(0, 5).join(', ')}`);
  }
  for (const v of checkEnd(expectation, seen)) violate(v);
  tag(`end: state ${finalState}, counters ${JSON.stringify(status?.counters ?? {})}, sink ${stored.length} items${warc ? `, WARC ${warc.captures.length} captures` : ''}`);
}

/**
 * What the renderers left in their TMPDIR. The launcher script's directory (`crawlfleet-chromium`,
 * one small script per Chromium path, reused by every renderer: issue #28 item 19) is kept by design
 * and does not grow; anything else (profiles, artifacts, Chromium's own) is left behind.
 */
function tempLeftIn(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((name) => !(name === 'crawlfleet-chromium' && readdirSync(join(dir, name)).every((f) => f.endsWith('.sh'))));
}

/** After a reset, only the items of the current run are compared with its counters. */
function filterSink(stored, expect) {
  if (!expect.resetHappened) return stored;
  return stored.filter((d) => expect.runItems.has(d.url));
}

/** Polls `read` (an object of counts) until every count is 0 or the time is up; returns the last reading. */
async function drained(read, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await read().catch(() => ({}));
    if (Object.values(r).every((n) => (Array.isArray(n) ? n.length : n) === 0) || Date.now() > deadline) return r;
    await sleep(1000);
  }
}

async function queuedJobCounts(redisUrl, keys) {
  const out = {};
  for (const stage of STAGES) {
    const queue = new Queue(stage, { connection: { url: redisUrl, maxRetriesPerRequest: 1 }, prefix: keys.queuePrefix(stage) });
    try {
      const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children');
      for (const [state, n] of Object.entries(c)) if (n) out[`${stage}:${state}`] = n;
    } finally {
      await queue.close();
    }
  }
  return out;
}

/** Every host's leases that have not lapsed, by the server's clock. */
async function liveLeases(redis, prefix) {
  const [sec, usec] = await redis.time();
  const nowMs = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
  const out = {};
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}:{polite:*}:host:*:leases`, 'COUNT', 1000);
    cursor = next;
    for (const key of found) {
      const n = await redis.zcount(key, nowMs, '+inf');
      if (n) out[key] = n;
    }
  } while (cursor !== '0');
  return out;
}

async function leftovers(redis, keys, crawlId) {
  const layout = await loadLayout(redis, keys, crawlId);
  if (!layout) return {};
  const out = {};
  for (const set of ['pending', 'active', 'delayed', 'parked']) {
    for (const stage of STAGES) out[`${set}:${stage}`] = (await Promise.all(allPartKeys(keys, layout).map((k) => redis.smembers(k[set][stage])))).flat();
  }
  return out;
}

async function main() {
  if (!existsSync(join(ROOT, 'services', 'cli', 'dist', 'main.js'))) {
    process.stderr.write('fuzz: the fleet is not built; run npm run build\n');
    process.exit(2);
  }
  const ferretBin = process.env.FERRETDB_BIN ?? join(homedir(), '.cache', 'crawlfleet', 'ferretdb-v1.24.2', 'ferretdb');
  if (!existsSync(ferretBin)) {
    process.stderr.write(`fuzz: FerretDB not found at ${ferretBin}; set FERRETDB_BIN (scripts/fuzz.sh installs it)\n`);
    process.exit(2);
  }
  const runDir = mkdtempSync(join(tmpdir(), 'crawlfleet-fuzz-'));
  installCleanup();
  const [redis, mongo] = await Promise.all([startRedis(join(runDir, 'redis')), startFerretDb(ferretBin, join(runDir, 'ferretdb'), mongoAnswers)]);
  say(`form ${form}; Redis ${redis.url} (AOF); FerretDB ${mongo.url}; run directory ${runDir}`);
  const deadline = minutes > 0 ? started + minutes * 60_000 : 0;
  const seeds = chosenSeeds.length ? chosenSeeds : short ? SHORT_SEEDS.map((seed) => ({ seed })) : [];
  const results = [];
  const nextSeed = () => (seeds.length ? seeds.shift() : deadline && Date.now() < deadline ? { seed: Math.floor(Math.random() * 2 ** 31) } : undefined);
  for (let next = nextSeed(); next !== undefined; next = nextSeed()) {
    const seed = next.seed;
    const schedule = drawSchedule(seed, next.form ?? form);
    say(`seed ${seed} (form ${schedule.form}): ${describeConfig(schedule.config)}`);
    for (const s of schedule.steps) say(`seed ${seed}:   ${describeStep(s)}`);
    const t0 = Date.now();
    let violations;
    try {
      violations = await runSchedule(schedule, { redis, mongo, runDir });
    } catch (err) {
      violations = [{ seed, step: 'harness', what: `the harness failed: ${err?.stack ?? err}` }];
      say(`seed ${seed}: ${violations[0].what}`);
    }
    const seconds = Math.round((Date.now() - t0) / 1000);
    results.push({ seed, form: schedule.form, seconds, violations });
    say(`seed ${seed}: ${violations.length ? `FAIL (${violations.length} violations)` : 'PASS'} in ${seconds} s; replay: npm run test:fuzz -- --seed ${seed}:${schedule.form}`);
  }
  const failed = results.filter((r) => r.violations.length);
  say(`summary: ${results.length} schedules, ${results.length - failed.length} passed, ${failed.length} failed in ${Math.round((Date.now() - started) / 1000)} s`);
  for (const r of failed) for (const v of r.violations) say(`  seed ${r.seed} at ${v.step}: ${v.what}`);
  mkdirSync(join(ROOT, 'test-artifacts'), { recursive: true });
  writeFileSync(join(ROOT, 'test-artifacts', `fuzz-${short ? 'short' : 'long'}.json`), JSON.stringify({ form, results }, null, 2));
  await killAllChildren();
  if (failed.length || keep) say(`kept the run directory (each seed's logs, Redis AOF, FerretDB data): ${runDir}`);
  else rmSync(runDir, { recursive: true, force: true });
  process.exit(failed.length ? 1 : 0);
}

await main();
