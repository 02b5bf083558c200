import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { BOOKS_ARCHIVE, serveFolder, unpack } from '../fixtures/static-site.mjs';
import { booksTruth } from '../helpers/books-truth.js';
import { ROOT, dropPrefix, runCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';
import { gotoSteady, rerunOnNetworkChange } from '../helpers/network-change.js';
import { freePort, waitForPort } from '../helpers/ports.js';

/** warcio, cdxj-indexer and pywb from PyPI, installed by scripts/services.sh (ensure_warc_tools). */
const WARC_TOOLS = process.env.WARC_TOOLS ?? '';
const ARTIFACTS = join(ROOT, 'test-artifacts');

function tool(name: string, args: string[], cwd?: string): string {
  const run = spawnSync(join(WARC_TOOLS, name), args, { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, ...(cwd ? { cwd } : {}) });
  if (run.status !== 0) throw new Error(`${name} ${args.join(' ')} exited ${run.status}: ${run.stderr}${run.stdout.slice(0, 2000)}`);
  return run.stdout;
}

interface ReadRecord {
  file: string;
  type: string;
  uri: string | null;
  id: string;
  payloadDigest: string | null;
  refersToUri: string | null;
  concurrentTo: string | null;
  status?: number;
  contentEncoding?: string | null;
  transferEncoding?: string | null;
  bodySha1?: string;
  outlinks?: string[];
}

/** Every record of the files, as python's warcio reads them (test/fixtures/reference/warc_records.py). */
function readRecords(files: string[]): ReadRecord[] {
  return JSON.parse(tool('python', [join(ROOT, 'test', 'fixtures', 'reference', 'warc_records.py'), ...files])) as ReadRecord[];
}

const cdxjUrls = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((line) => (JSON.parse(line.slice(line.indexOf('{'))) as { url: string }).url)
    .sort();

describe('WARC output (--warc)', () => {
  beforeAll(() => {
    if (!WARC_TOOLS || !existsSync(join(WARC_TOOLS, 'wayback')))
      throw new Error('WARC_TOOLS is not set to a virtualenv with warcio, cdxj-indexer and pywb: run the suite with scripts/test.sh (ensure_warc_tools)');
  });

  test('the books crawl archived: valid for warcio, indexed as cdxj-indexer does, one response per fetched URL with its encoding as sent, replayed by pywb', async () => {
    const root = unpack(BOOKS_ARCHIVE);
    // gzip-encoded and chunked, as nginx sends HTML
    const site = await serveFolder(root, { gzip: true });
    const prefix = uniquePrefix('warc');
    const dir = tempDir('warc');
    const warcDir = join(dir, 'warc');
    const env = testEnv(prefix);
    try {
      const example = JSON.parse(readFileSync(join(ROOT, 'examples', 'books.json'), 'utf8'));
      const spider = writeJson(dir, 'books.json', JSON.parse(JSON.stringify(example).replaceAll('127.0.0.1:8080', site.url.replace('http://', ''))));
      // A small rollover size, so that the crawl spans several files.
      const run = await runCli(['crawl', spider, '--crawl-id', 'books-warc', '--out', join(dir, 'items.jsonl'), '--warc', warcDir, '--warc-rollover', '1000000', '--json'], { env });
      expect(run.code).toBe(0);
      const status = JSON.parse(run.stdout.trim().split('\n').pop()!);
      const truth = booksTruth(root, site.url);
      const pages = 49 + 1 + truth.detailLinks.size;
      expect(status.counters).toMatchObject({ fetched: pages, parsed: 249, items: 1180, archived: pages });

      const files = readdirSync(warcDir)
        .filter((f) => f.endsWith('.warc.gz'))
        .sort()
        .map((f) => join(warcDir, f));
      expect(files.map((f) => f.split('/').pop())).toEqual(files.map((_, i) => `books-warc-${String(i + 1).padStart(5, '0')}.warc.gz`));
      expect(files.length).toBeGreaterThanOrEqual(2);

      // Independent readers accept every file.
      for (const file of files) {
        expect(tool('warcio', ['check', file])).toBe('');
        expect(tool('warcio', ['index', file]).trim().split('\n').length).toBeGreaterThan(1);
        // our CDXJ names the same captures as cdxj-indexer's
        expect(cdxjUrls(readFileSync(`${file}.cdxj`, 'utf8'))).toEqual(cdxjUrls(tool('cdxj-indexer', [file])));
      }

      const records = readRecords(files);
      // each file opens with its warcinfo
      for (const file of files) expect(records.find((r) => r.file === file)!.type).toBe('warcinfo');
      // one response or revisit per fetched URL, and one request
      const captures = records.filter((r) => r.type === 'response' || r.type === 'revisit');
      expect(captures).toHaveLength(pages);
      expect(new Set(captures.map((c) => c.uri)).size).toBe(pages);
      expect(records.filter((r) => r.type === 'request')).toHaveLength(pages);
      const byId = new Map(records.map((r) => [r.id, r]));
      for (const request of records.filter((r) => r.type === 'request')) expect(byId.get(request.concurrentTo!)?.uri).toBe(request.uri);

      // The pages as sent: gzip kept, and undone it is the file on disk, byte for byte.
      const pageOnDisk = (uri: string) => readFileSync(join(root, new URL(uri).pathname.replace(/\/$/, '/index.html')));
      const ok = captures.filter((c) => c.type === 'response' && c.status === 200);
      expect(ok).toHaveLength(249);
      for (const response of ok) {
        expect(response.contentEncoding).toBe('gzip');
        expect(response.transferEncoding).toBeNull();
        expect(response.bodySha1).toBe(createHash('sha1').update(pageOnDisk(response.uri!)).digest('hex'));
      }

      // The 790 missing pages answer the same 404 body: the first is a response, the rest revisit it.
      const notFound = captures.filter((c) => c.status === 404);
      expect(notFound).toHaveLength(pages - 249);
      const originals = notFound.filter((c) => c.type === 'response');
      expect(originals).toHaveLength(1);
      for (const revisit of notFound.filter((c) => c.type === 'revisit')) {
        expect(revisit.payloadDigest).toBe(originals[0]!.payloadDigest);
        expect(revisit.refersToUri).toBe(originals[0]!.uri);
      }

      // The parsed pages' outlinks, in a metadata record beside the response.
      const page2 = `${site.url}/catalogue/page-2.html`;
      const metadata = records.find((r) => r.type === 'metadata' && r.uri === page2)!;
      expect(byId.get(metadata.concurrentTo!)?.uri).toBe(page2);
      expect(metadata.outlinks).toContain(`${site.url}/catalogue/page-3.html`);
      expect(metadata.outlinks).toHaveLength(21);

      // pywb replays page 2 from the archive, on our CDXJ; Chromium renders it.
      const pywb = join(dir, 'pywb');
      mkdirSync(pywb);
      tool('wb-manager', ['init', 'books'], pywb);
      const collection = join(pywb, 'collections', 'books');
      for (const file of files) copyFileSync(file, join(collection, 'archive', file.split('/').pop()!));
      writeFileSync(
        join(collection, 'indexes', 'index.cdxj'),
        files
          .flatMap((f) => readFileSync(`${f}.cdxj`, 'utf8').split('\n').filter(Boolean))
          .sort()
          .join('\n'),
      );
      const port = await freePort();
      // `timeout`: it stops by itself even if this test dies
      const server = spawn('timeout', ['300', join(WARC_TOOLS, 'wayback'), '-b', '127.0.0.1', '-p', String(port)], { cwd: pywb, stdio: 'ignore' });
      try {
        await waitForPort(port, 60_000, 'pywb');
        const replayed = await fetch(`http://127.0.0.1:${port}/books/2030id_/${page2}`);
        expect(replayed.status).toBe(200);
        expect(Buffer.from(await replayed.arrayBuffer()).equals(pageOnDisk(page2))).toBe(true);

        const browser = await chromium.launch({
          executablePath: '/usr/bin/chromium',
          // nothing but loopback resolves: the replay must not reach anything else
          args: [
            '--headless',
            '--no-sandbox',
            '--disable-gpu',
            '--no-first-run',
            '--disable-background-networking',
            '--disable-component-update',
            '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
          ],
        });
        try {
          await rerunOnNetworkChange(async (watch) => {
            const page = watch.watch(await browser.newPage({ viewport: { width: 1280, height: 1000 } }));
            try {
              await gotoSteady(page, `http://127.0.0.1:${port}/books/2030/${page2}`, { waitUntil: 'load' });
              const frame = page.frames().find((f) => f.url().includes('mp_/'));
              expect(frame).toBeDefined();
              await frame!.waitForSelector('article.product_pod');
              expect(await frame!.locator('article.product_pod').count()).toBe(20);
              expect(await frame!.locator('li.current').textContent()).toContain('Page 2 of 50');
              mkdirSync(ARTIFACTS, { recursive: true });
              await page.screenshot({ path: join(ARTIFACTS, 'warc-pywb-page-2.png') });
            } finally {
              await page.close();
            }
          });
        } finally {
          await browser.close();
        }
      } finally {
        server.kill();
      }
    } finally {
      await site.close();
      await dropPrefix(prefix);
    }
  });

  test('a rollover size too small to be one is refused at start, exit 2, naming the option; nothing is registered', async () => {
    const prefix = uniquePrefix('warc-bad');
    const dir = tempDir('warc-bad');
    try {
      const spider = writeJson(dir, 's.json', { name: 's', startUrls: ['http://127.0.0.1:9/'], allowPrivateAddresses: true });
      const run = await runCli(['seed', spider, '--crawl-id', 'bad', '--warc', join(dir, 'warc'), '--warc-rollover', '5'], { env: testEnv(prefix) });
      expect(run.code).toBe(2);
      expect(run.stderr).toContain('--warc-rollover: 5 is not a size in bytes of at least 1000000');
      expect(JSON.parse((await runCli(['status', '--json'], { env: testEnv(prefix) })).stdout)).toEqual([]);
    } finally {
      await dropPrefix(prefix);
    }
  });
});
