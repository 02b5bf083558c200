// Pure: the fuzzer's invariants. Each check takes what the runner read and returns what differed, as
// sentences; the runner prints each with the seed and the step. No I/O, so a verdict is reproducible.

const ENDED = new Set(['done', 'failed', 'cancelled']);
const WORK = ['seen', 'fetched', 'parsed', 'items', 'written', 'failed'];
const sample = (list, n = 5) => `${list.slice(0, n).join(', ')}${list.length > n ? `, … (${list.length})` : ''}`;

/**
 * Along the way, between two readings of the status: within a run, no counter goes back, and a crawl
 * that is done does no more work unless an operation since the last reading opened it again.
 * `opened`: a reset, re-seed, replay or recrawl ran between the readings.
 */
export function checkProgress(prev, cur, { opened }) {
  const out = [];
  if (!prev || !cur || opened) return out;
  for (const name of WORK) {
    const before = prev.counters[name] ?? 0;
    const after = cur.counters[name] ?? 0;
    if (after < before) out.push(`counter ${name} went back from ${before} to ${after} within a run`);
  }
  if (prev.state === 'done' && cur.state === 'done') {
    const moved = WORK.filter((n) => (prev.counters[n] ?? 0) !== (cur.counters[n] ?? 0));
    if (moved.length) out.push(`work after done: ${moved.map((n) => `${n} ${prev.counters[n] ?? 0}→${cur.counters[n] ?? 0}`).join(', ')}`);
  }
  if (ENDED.has(prev.state) && cur.state === 'running') out.push(`the crawl went from ${prev.state} back to running with no operation that opens it`);
  return out;
}

/** RSS of every worker and Redis's memory, against their bounds. */
export function checkResources({ rssByProcess, redisUsedBytes }, bounds) {
  const out = [];
  for (const [name, rss] of Object.entries(rssByProcess)) {
    if (rss > bounds.rssBytes) out.push(`${name} RSS ${Math.round(rss / 2 ** 20)} MiB over the bound ${Math.round(bounds.rssBytes / 2 ** 20)} MiB`);
  }
  if (redisUsedBytes > bounds.redisBytes) out.push(`Redis used_memory ${Math.round(redisUsedBytes / 2 ** 20)} MiB over the bound ${Math.round(bounds.redisBytes / 2 ** 20)} MiB`);
  return out;
}

/**
 * At the end. `expect`: { state: 'done' | 'cancelled', items: Map url->title (exact runs only), dead: Set,
 * exact: boolean (counters must match the items), writtenIsSink: boolean (no reset nor recrawl, whose
 * counters are the new run's: the sink holds what `written` counted, whatever the crawl's end), runs: the runs that fetched every URL (the first, and
 * one more for each reset and recrawl), replays: the replays (each fetches the dead letters again),
 * plainFetched: Set (URLs archived when the run fetched them plain) }.
 */
export function checkEnd(expect, seen) {
  const out = [];
  if (seen.finalState !== expect.state) out.push(`the crawl ended ${seen.finalState ?? 'unknown'}, expected ${expect.state}`);
  if (seen.stayedPaused === false) out.push('the crawl left paused by itself');
  out.push(...checkSink(expect, seen));
  out.push(...checkLeftovers(seen));
  if (seen.warc) out.push(...checkWarc(expect, seen));
  if (seen.chromiumLeft?.length) out.push(`${seen.chromiumLeft.length} Chromium processes left after the fleet stopped: pids ${sample(seen.chromiumLeft)}`);
  if (seen.tempLeft?.length) out.push(`temporary directories left after the fleet stopped: ${sample(seen.tempLeft)}`);
  return out;
}

/** Every item exactly once, `written` equal to what the sink holds, and the dead letters the 404s. */
function checkSink(expect, seen) {
  const out = [];
  const c = seen.counters ?? {};
  const byUrl = new Map();
  for (const doc of seen.stored) byUrl.set(doc.url, (byUrl.get(doc.url) ?? 0) + 1);
  const dupes = [...byUrl].filter(([, n]) => n > 1).map(([u]) => u);
  if (dupes.length) out.push(`items stored more than once: ${sample(dupes)}`);
  if ((expect.exact || expect.writtenIsSink) && (c.written ?? 0) !== seen.stored.length) {
    out.push(`${seen.collected ? 'the collected summary says ' : ''}written ${c.written ?? 0}, the sink holds ${seen.stored.length}`);
  }
  if (expect.items) {
    const missing = [...expect.items.keys()].filter((u) => !byUrl.has(u));
    const extra = [...byUrl.keys()].filter((u) => !expect.items.has(u));
    const wrong = seen.stored.filter((d) => expect.items.has(d.url) && d.title !== expect.items.get(d.url)).map((d) => `${d.url} "${d.title}"`);
    if (missing.length) out.push(`${missing.length} items missing from the sink: ${sample(missing)}`);
    if (extra.length) out.push(`${extra.length} items in the sink that the site does not have: ${sample(extra)}`);
    if (wrong.length) out.push(`${wrong.length} items with a wrong title: ${sample(wrong)}`);
  }
  if (expect.exact && !seen.collected) {
    const want = { items: expect.items.size, written: expect.items.size, failed: expect.dead.size, invalid: 0 };
    for (const [name, value] of Object.entries(want)) if ((c[name] ?? 0) !== value) out.push(`counter ${name} ${c[name] ?? 0}, expected ${value}`);
    const deadUrls = new Set(seen.deadLetters.map((d) => d.url));
    const unexpected = seen.deadLetters.filter((d) => !expect.dead.has(d.url) || d.reason !== 'HTTP 404').map((d) => `${d.url} ${d.code} ${d.reason}`);
    const absent = [...expect.dead].filter((u) => !deadUrls.has(u));
    if (unexpected.length) out.push(`unexpected dead letters: ${sample(unexpected)}`);
    if (absent.length) out.push(`404s without a dead letter: ${sample(absent)}`);
  }
  return out;
}

/** No job outlives its run: no id left in the crawl's sets, no job in BullMQ, no host lease held. */
function checkLeftovers(seen) {
  const out = [];
  if (seen.finalState === 'done' || seen.finalState === 'cancelled') {
    for (const [where, n] of Object.entries(seen.queuedJobs ?? {})) if (n > 0) out.push(`${n} jobs left in BullMQ ${where} after the crawl ended`);
  }
  if (seen.finalState === 'done') {
    for (const [where, ids] of Object.entries(seen.leftoverSets ?? {})) if (ids.length) out.push(`set ${where} not empty after done: ${sample(ids)}`);
  }
  for (const [host, n] of Object.entries(seen.leasesHeld ?? {})) if (n > 0) out.push(`host ${host} still has ${n} requests in flight after the crawl ended`);
  return out;
}

/** Every URI archived once per run; every page fetched plain is archived. */
function checkWarc(expect, seen) {
  const out = [];
  const { captures, invalidFiles } = seen.warc;
  if (invalidFiles.length) out.push(`${invalidFiles.length} WARC files fail warcio check: ${sample(invalidFiles.map((f) => f.file))}`);
  const copies = new Map();
  for (const { uri } of captures) copies.set(uri, (copies.get(uri) ?? 0) + 1);
  // a replay fetches the dead letters again (and only them): one more capture each
  const allowed = (uri) => expect.runs + (expect.dead.has(uri) ? (expect.replays ?? 0) : 0);
  const over = [...copies].filter(([u, n]) => n > allowed(u)).map(([u, n]) => `${u} ×${n} (runs ${allowed(u)})`);
  if (over.length) out.push(`URIs archived more than once per run: ${sample(over)}`);
  if (expect.exact && expect.state === 'done') {
    const absent = [...expect.plainFetched].filter((u) => !copies.has(u));
    if (absent.length) out.push(`${absent.length} pages fetched plain but not archived: ${sample(absent)}`);
    if (expect.runs === 1 && seen.counters && (seen.counters.archived ?? 0) !== copies.size) out.push(`counter archived ${seen.counters.archived ?? 0}, the WARC files hold ${copies.size} URIs`);
  }
  return out;
}
