// Pure: the chaos suite's tables (Markdown), from the scenario results.

const row = (cells) => `| ${cells.join(' | ')} |`;
const table = (head, rows) => [row(head), row(head.map(() => '---')), ...rows.map(row)].join('\n');

/** @param {any[]} results one per scenario: { name, injected, found, durationS } */
export function markdownReport(results, meta) {
  const injected = table(
    ['scenario', 'kill -9 fetcher', 'kill -9 parser', 'kill -9 writer', 'Redis kill -9', 'MongoDB outage (s)', 'writer kills in outage', 'workers that exited by themselves'],
    results.map((r) => [
      r.name,
      r.injected.kills.fetcher,
      r.injected.kills.parser,
      r.injected.kills.writer,
      r.injected.redisKills,
      r.injected.mongoOutageS,
      r.injected.writerKillsInOutage,
      r.injected.unexpectedExits,
    ]),
  );
  const found = table(
    ['scenario', 'ended', 'pages', 'items expected', 'items stored', 'missing', 'duplicates', 'wrong title', 'written again', 'dead letters (expected)', 'counters', 'duration (s)', 'verdict'],
    results.map((r) => [
      r.name,
      r.found.endedDone ? 'done' : (r.found.finalState ?? 'unknown'),
      r.found.pages,
      r.found.itemsExpected,
      r.found.itemsStored,
      r.found.missing,
      r.found.duplicates,
      r.found.wrongTitles,
      r.found.rewritten,
      `${r.found.deadLetters} (${r.found.deadExpected})`,
      r.found.counterMismatches.length === 0 ? 'exact' : r.found.counterMismatches.map((m) => `${m.counter} ${m.found}≠${m.expected}`).join(', '),
      r.durationS,
      `${r.found.pass ? 'PASS' : 'FAIL'}${r.found.buildChanged ? ' (rebuilt mid-run)' : ''}`,
    ]),
  );
  const archived = results.filter((r) => r.found.warc);
  const warc = table(
    ['scenario', 'WARC files', 'responses and revisits', 'invalid files', 'fetched URLs without one', 'URLs with more than one'],
    archived.map((r) => [r.name, r.warcFiles ?? '', r.found.warc.captures, r.found.warc.invalidFiles.length, r.found.warc.missing, r.found.warc.duplicates]),
  );
  const problems = results
    .filter((r) => !r.found.pass)
    .map((r) => `- **${r.name}**: ${r.found.problems.join('; ')}`)
    .join('\n');
  return [
    `# Chaos suite (${meta.form} form), ${meta.date}`,
    '',
    `Site: ${meta.site} (${meta.pagesPerHost} pages) under ${meta.hosts} host names; fleet: ${meta.fleet}; machine: ${meta.machine}.`,
    '',
    '## Injected',
    '',
    injected,
    '',
    '## Found',
    '',
    found,
    ...(archived.length ? ['', '## WARC output', '', warc] : []),
    ...(problems ? ['', '## Problems', '', problems] : []),
    '',
  ].join('\n');
}
