import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const DATA = join(import.meta.dirname, '..', 'fixtures', 'data');

/** The real pages of test/fixtures/data (see its README), unpacked into a temporary folder: the folder and its .html files. */
export function unpackRealPages(archives: readonly string[] = ['books-toscrape-site.tar.gz', 'top-sites-html.tar.gz']): { dir: string; files: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'crawlfleet-real-'));
  for (const archive of archives) execFileSync('tar', ['xzf', join(DATA, archive), '-C', dir]);
  const files: string[] = [];
  const walk = (d: string) => {
    for (const f of readdirSync(d)) {
      const p = join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else if (p.endsWith('.html')) files.push(p);
    }
  };
  walk(dir);
  return { dir, files };
}
