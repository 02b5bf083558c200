// The fuzzer's readings of the world outside Redis: the WARC files (read by python's warcio, not by
// the code under test), the Chromium processes a run left, and whether MongoDB answers.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../chaos/fleet.mjs';

/** WARC_TOOLS (scripts/services.sh ensure_warc_tools), or the virtualenv it made before. */
function warcTools() {
  if (process.env.WARC_TOOLS) return process.env.WARC_TOOLS;
  const cache = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'crawlfleet');
  const venv = existsSync(cache) ? readdirSync(cache).find((d) => d.startsWith('warc-tools-') && existsSync(join(cache, d, 'bin', 'warcio'))) : undefined;
  if (!venv) throw new Error('WARC_TOOLS is not set and no warcio virtualenv was found: run the fuzzer through npm run test:fuzz (scripts/fuzz.sh installs it)');
  return join(cache, venv, 'bin');
}

/** Every file of the directory checked by `warcio check`, and the target URI of each response and revisit. */
export function readWarcDir(dir) {
  const tools = warcTools();
  const files = existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => f.endsWith('.warc.gz'))
        .sort()
        .map((f) => join(dir, f))
    : [];
  const invalidFiles = [];
  for (const file of files) {
    const check = spawnSync(join(tools, 'warcio'), ['check', file], { encoding: 'utf8' });
    if (check.status !== 0) invalidFiles.push({ file, reason: `${check.stdout}${check.stderr}`.slice(0, 500) });
  }
  if (files.length === 0) return { captures: [], invalidFiles, files: 0 };
  const read = spawnSync(join(tools, 'python'), [join(ROOT, 'test', 'fixtures', 'reference', 'warc_records.py'), ...files], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  if (read.status !== 0) throw new Error(`warc_records.py exited ${read.status}: ${read.stderr.slice(-1000)}`);
  const captures = JSON.parse(read.stdout)
    .filter((r) => r.type === 'response' || r.type === 'revisit')
    .map((r) => ({ uri: r.uri, date: r.date }));
  return { captures, invalidFiles, files: files.length };
}

/** The pids of the processes whose command line names `dir` (a run's Chromium profiles live there). */
export function chromiumProcessesUnder(dir) {
  const out = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmdline.includes(dir) && /chrom/i.test(cmdline)) out.push(Number(pid));
    } catch {
      // gone in between
    }
  }
  return out;
}
