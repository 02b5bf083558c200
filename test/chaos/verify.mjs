// Pure: what a finished chaos scenario found, against the ground truth. No I/O, so the harness's
// verdict is the same however its numbers were gathered.

const SAMPLE = 20;
const sample = (list) => list.slice(0, SAMPLE);

/**
 * @param {{
 *   truth: { pages: Map<string, string>, dead: Set<string> },
 *   stored: { url: string, title: unknown }[],
 *   deadLetters: { url?: string, stage?: string, code?: string, reason?: string }[],
 *   endedDone: boolean,
 *   finalState: string | null,
 *   countersAtDone: Record<string, number> | null,
 *   countersFinal: Record<string, number> | null,
 *   leftovers: Record<string, Record<string, string[]>>,
 *   waitExit: number | null,
 *   warc?: { captures: { uri: string }[], invalidFiles: { file: string, reason: string }[] },
 * }} run
 */
export function verify(run) {
  const { truth } = run;
  const byUrl = new Map();
  for (const doc of run.stored) byUrl.set(doc.url, [...(byUrl.get(doc.url) ?? []), doc]);
  const missing = [...truth.pages.keys()].filter((u) => !byUrl.has(u)).sort();
  const unexpected = [...byUrl.keys()].filter((u) => !truth.pages.has(u)).sort();
  const duplicates = [...byUrl.entries()].filter(([, docs]) => docs.length > 1).map(([url, docs]) => ({ url, copies: docs.length }));
  const wrongTitles = [...byUrl.entries()]
    .filter(([url, docs]) => truth.pages.has(url) && docs.some((d) => d.title !== truth.pages.get(url)))
    .map(([url, docs]) => ({ url, expected: truth.pages.get(url), stored: docs.map((d) => d.title) }));

  // Informational: an item written again (a write job that ran twice) moves its lastSeenAt.
  const rewritten = run.stored
    .filter((d) => d.firstSeenAt && d.lastSeenAt && +new Date(d.lastSeenAt) > +new Date(d.firstSeenAt))
    .map((d) => ({ url: d.url, firstSeenAt: new Date(d.firstSeenAt).toISOString(), lastSeenAt: new Date(d.lastSeenAt).toISOString() }))
    .sort((a, b) => a.url.localeCompare(b.url));

  const deadUrls = run.deadLetters.map((d) => d.url ?? '');
  const deadUnexpected = run.deadLetters.filter((d) => !truth.dead.has(d.url ?? '') || d.reason !== 'HTTP 404');
  const deadMissing = [...truth.dead].filter((u) => !deadUrls.includes(u)).sort();

  const pages = truth.pages.size;
  // A 404 is fetched (it got an answer) and failed (dead-lettered): fetched counts every seen URL.
  const expectedCounters = { seen: pages + truth.dead.size, fetched: pages + truth.dead.size, parsed: pages, items: pages, written: pages, failed: truth.dead.size, invalid: 0 };
  const counterMismatches = Object.entries(expectedCounters)
    .filter(([name, value]) => (run.countersFinal?.[name] ?? NaN) !== value)
    .map(([name, value]) => ({ counter: name, expected: value, found: run.countersFinal?.[name] ?? null }));
  const movedAfterDone =
    run.countersAtDone && run.countersFinal
      ? Object.keys(run.countersFinal)
          .filter((k) => (run.countersAtDone[k] ?? 0) !== (run.countersFinal[k] ?? 0))
          .map((k) => ({ counter: k, atDone: run.countersAtDone[k] ?? 0, after: run.countersFinal[k] ?? 0 }))
      : [];
  const leftoverSets = Object.entries(run.leftovers).flatMap(([set, stages]) =>
    Object.entries(stages)
      .filter(([, ids]) => ids.length > 0)
      .map(([stage, ids]) => ({ set: `${set}:${stage}`, count: ids.length, ids: sample(ids) })),
  );

  // WARC output (a scenario with `warc`): one response or revisit per fetched URL, every file valid.
  const warc = run.warc ? warcFindings(run.warc, truth) : undefined;
  if (warc) {
    expectedCounters.archived = pages + truth.dead.size;
    const found = run.countersFinal?.archived ?? null;
    if (found !== expectedCounters.archived) counterMismatches.push({ counter: 'archived', expected: expectedCounters.archived, found });
  }

  const problems = [];
  if (!run.endedDone) problems.push(`the crawl did not end done (state ${run.finalState ?? 'unknown'})`);
  if (run.endedDone && run.waitExit !== 0) problems.push(`\`wait\` exited ${run.waitExit} on the done crawl`);
  if (missing.length) problems.push(`${missing.length} pages missing from MongoDB`);
  if (unexpected.length) problems.push(`${unexpected.length} stored items not in the ground truth`);
  if (duplicates.length) problems.push(`${duplicates.length} pages stored more than once`);
  if (wrongTitles.length) problems.push(`${wrongTitles.length} pages stored with a wrong title`);
  if (deadUnexpected.length) problems.push(`${deadUnexpected.length} unexpected dead letters`);
  if (deadMissing.length) problems.push(`${deadMissing.length} expected 404 dead letters absent`);
  for (const m of counterMismatches) problems.push(`counter ${m.counter} ${m.found} (expected ${m.expected})`);
  if (movedAfterDone.length) problems.push(`counters moved after done: ${movedAfterDone.map((m) => `${m.counter} ${m.atDone}→${m.after}`).join(', ')}`);
  if (run.endedDone && leftoverSets.length) problems.push(`sets not empty after done: ${leftoverSets.map((s) => `${s.set} (${s.count})`).join(', ')}`);
  if (warc) {
    if (warc.invalidFiles.length) problems.push(`${warc.invalidFiles.length} WARC files invalid (warcio check)`);
    if (warc.missing.length) problems.push(`${warc.missing.length} fetched URLs without a WARC response`);
    if (warc.duplicates.length) problems.push(`${warc.duplicates.length} URLs with more than one WARC response`);
    if (warc.unexpected.length) problems.push(`${warc.unexpected.length} WARC responses for URLs not fetched`);
  }

  return {
    pass: problems.length === 0,
    problems,
    pages,
    itemsExpected: pages,
    itemsStored: run.stored.length,
    distinctStored: byUrl.size,
    missing: missing.length,
    missingSample: sample(missing),
    unexpected: unexpected.length,
    unexpectedSample: sample(unexpected),
    duplicates: duplicates.length,
    duplicatesSample: sample(duplicates),
    wrongTitles: wrongTitles.length,
    wrongTitlesSample: sample(wrongTitles),
    rewritten: rewritten.length,
    rewrittenSample: sample(rewritten),
    deadLetters: run.deadLetters.length,
    deadExpected: truth.dead.size,
    deadUnexpectedSample: sample(deadUnexpected),
    deadMissingSample: sample(deadMissing),
    counterMismatches,
    movedAfterDone,
    leftoverSets,
    ...(warc
      ? {
          warc: {
            captures: warc.captures,
            invalidFiles: warc.invalidFiles,
            missing: warc.missing.length,
            missingSample: sample(warc.missing),
            duplicates: warc.duplicates.length,
            duplicatesSample: sample(warc.duplicates),
            unexpected: warc.unexpected.length,
            unexpectedSample: sample(warc.unexpected),
          },
        }
      : {}),
  };
}

/** The WARC files against the fetched URLs: the live pages and the broken links (their 404s are archived too). */
function warcFindings(warc, truth) {
  const fetched = new Set([...truth.pages.keys(), ...truth.dead]);
  const copies = new Map();
  for (const { uri } of warc.captures) copies.set(uri, (copies.get(uri) ?? 0) + 1);
  return {
    captures: warc.captures.length,
    invalidFiles: warc.invalidFiles,
    missing: [...fetched].filter((u) => !copies.has(u)).sort(),
    duplicates: [...copies].filter(([, n]) => n > 1).map(([url, n]) => ({ url, copies: n })),
    unexpected: [...copies.keys()].filter((u) => !fetched.has(u)).sort(),
  };
}
