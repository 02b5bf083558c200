import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as cheerio from 'cheerio';
import { surtKey } from '@crawlfleet/storage';
import { TOP_SITES_ARCHIVE, unpack } from '../fixtures/static-site.mjs';

const WARC_TOOLS = process.env.WARC_TOOLS ?? '';

describe("the CDXJ's keys are the ones pywb looks URLs up by", () => {
  test("surtKey equals python's surt.surt on every link of the 130 top-site pages", () => {
    if (!WARC_TOOLS) throw new Error('WARC_TOOLS is not set: run the suite with scripts/test.sh (ensure_warc_tools)');
    const root = unpack(TOP_SITES_ARCHIVE);
    const urls = new Set<string>();
    for (const file of readdirSync(root).filter((f) => f.endsWith('.html'))) {
      const $ = cheerio.load(readFileSync(join(root, file), 'latin1'));
      $('a[href]').each((_, a) => {
        try {
          // as the fleet would have them: resolved and WHATWG-normalised
          const url = new URL($(a).attr('href')!, 'https://www.example.com/dir/page.html');
          if (url.protocol === 'http:' || url.protocol === 'https:') urls.add(url.href);
        } catch {
          // not a URL: no page to archive
        }
      });
    }
    const list = [...urls];
    expect(list.length).toBeGreaterThan(20_000);
    const python = spawnSync(join(WARC_TOOLS, 'python'), ['-c', 'import sys, surt, json; print(json.dumps([surt.surt(u) for u in json.load(sys.stdin)]))'], {
      input: JSON.stringify(list),
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
    expect(python.status).toBe(0);
    const expected = JSON.parse(python.stdout) as string[];
    const differ = list.map((url, i) => ({ url, ours: surtKey(url), pywb: expected[i] })).filter((d) => d.ours !== d.pywb);
    expect(differ.slice(0, 10)).toEqual([]);
  });
});
