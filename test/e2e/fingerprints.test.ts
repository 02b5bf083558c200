// The fingerprint site (test/fixtures/fingerprint-site.mjs) against a real browser: Debian's Chromium
// visits it on loopback, and what the site records must match the reference recorded from the same
// browser (test/fixtures/reference/fingerprints.json, by record-fingerprints.mjs). When Debian has
// upgraded Chromium past the reference's version, the parts that hold across versions are checked and
// the test says to record the references again. Then the bot wall (bot-wall.mjs), driven by Chromium.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, type BrowserContextOptions, chromium, type Page } from 'playwright-core';
import { startBotWall } from '../fixtures/bot-wall.mjs';
import { makeTestCertificates, startFingerprintSite } from '../fixtures/fingerprint-site.mjs';
import { BOOKS_ARCHIVE, serveFolder, unpack } from '../fixtures/static-site.mjs';
import { visitWithChromium } from '../fixtures/record-fingerprints.mjs';
import { ROOT } from '../helpers/cli.js';
import { rerunOnNetworkChange } from '../helpers/network-change.js';

const references = JSON.parse(readFileSync(join(ROOT, 'test/fixtures/reference/fingerprints.json'), 'utf8'));
const major = (version: string) => /(\d+)\./.exec(version)?.[1];

describe('the fingerprint site records a real browser', () => {
  let dir: string;
  let site: Awaited<ReturnType<typeof startFingerprintSite>>;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fingerprints-'));
    const paths = makeTestCertificates(dir);
    site = await startFingerprintSite({ cert: readFileSync(paths.cert), key: readFileSync(paths.key) });
  });
  afterAll(async () => {
    await site?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('bytes that are no ClientHello close their connection, and the site goes on', async () => {
    const hostile = [
      Buffer.from('16030100050100000100', 'hex'), // a ClientHello cut short
      Buffer.from('16030100050200000100', 'hex'), // a ServerHello
      Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'), // no TLS at all
    ];
    for (const bytes of hostile) {
      const closed = await new Promise<boolean>((resolve) => {
        const socket = connect(site.port, '127.0.0.1', () => socket.write(bytes));
        socket.on('close', () => resolve(true));
        socket.on('error', () => undefined);
      });
      expect(closed).toBe(true);
    }
    const status = await new Promise<number | undefined>((resolve, reject) => {
      httpsRequest({ host: '127.0.0.1', port: site.port, path: '/after.json', rejectUnauthorized: false }, (res) => {
        res.resume();
        resolve(res.statusCode);
      })
        .on('error', reject)
        .end();
    });
    expect(status).toBe(200);
    expect(site.visits.at(-1)).toMatchObject({ path: '/after.json', protocol: 'http/1.1' });
  });

  test("Chromium's JA4, HTTP/2 fingerprint and header order are its reference's", async () => {
    const { version, visit } = await visitWithChromium(site, dir);
    const reference = references.chromium;
    console.log(`chromium ${version}: ${visit.ja4} ${visit.http2?.akamai}; reference (${reference.version}): ${reference.visit.ja4}`);
    expect(visit).toMatchObject({ protocol: 'h2', alpnOffered: ['h2', 'http/1.1'], sni: 'fingerprint.test' });
    expect(visit.ja4).toMatch(/^t13d\d{4}h2_/);
    expect(visit.http2.pseudoHeaderOrder).toEqual([':method', ':authority', ':scheme', ':path']);
    if (major(version) !== major(reference.version)) {
      console.warn(`Chromium is now ${version}, the references are from ${reference.version}: run node test/fixtures/record-fingerprints.mjs`);
      return;
    }
    expect(visit.ja4).toBe(reference.visit.ja4);
    expect(visit.http2.akamai).toBe(reference.visit.http2.akamai);
    expect(visit.headerOrder).toEqual(reference.visit.headerOrder);
  });
});

/** The page's own requests for its favicon or images would count against the session: only documents go. */
async function documentsOnly(page: Page): Promise<Page> {
  await page.route('**/*', (route) => (route.request().resourceType() === 'document' ? route.continue() : route.abort()));
  return page;
}

describe('the bot wall in front of the books site', () => {
  let dir: string;
  let paths: { cert: string; key: string };
  let books: { url: string; close: () => Promise<void> };
  let browser: Browser;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'bot-wall-'));
    paths = makeTestCertificates(dir);
    books = await serveFolder(unpack(BOOKS_ARCHIVE));
    browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ['--host-resolver-rules=MAP fingerprint.test 127.0.0.1'] });
  });
  afterAll(async () => {
    await browser?.close();
    await books?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('Chromium passes and keeps one session; its cookie under another User-Agent, or used too often, is blocked; Node is blocked', async () => {
    // The wall counts every request it sees, so a run that a network change cut runs again with a new wall.
    await rerunOnNetworkChange(async (watch) => {
      const wall = await startBotWall({ cert: readFileSync(paths.cert), key: readFileSync(paths.key), upstream: books.url, references, limits: { maxRequests: 4, windowMs: 3_600_000 } });
      const contexts: BrowserContext[] = [];
      const newContext = async (options: BrowserContextOptions = {}) => {
        contexts.push(watch.watch(await browser.newContext({ ignoreHTTPSErrors: true, ...options })));
        return contexts.at(-1)!;
      };
      try {
        await theWallScenario(wall, newContext);
      } finally {
        for (const context of contexts) await context.close();
        await wall.close();
      }
    });
  });
});

async function theWallScenario(wall: Awaited<ReturnType<typeof startBotWall>>, newContext: (options?: BrowserContextOptions) => Promise<BrowserContext>): Promise<void> {
  const url = `https://fingerprint.test:${wall.port}/catalogue/page-2.html`;
  const context = await newContext();
  const page = await documentsOnly(await context.newPage());
  const first = await page.goto(url);
  expect(first?.status()).toBe(200);
  expect(await page.title()).toContain('Books');
  expect((await page.goto(url))?.status()).toBe(200);
  expect(wall.counts).toMatchObject({ allowed: 2, blocked: 0, sessionsStarted: 1 });

  const cookies = await context.cookies();
  expect(cookies.map((c) => c.name)).toEqual(['wall_session']);
  const userAgent = await page.evaluate(() => navigator.userAgent);
  const other = await newContext({ userAgent: userAgent.replace(/Chrome\/(\d+)/, (_, major) => `Chrome/${Number(major) - 1}`) });
  await other.addCookies(cookies);
  expect((await (await documentsOnly(await other.newPage())).goto(url))?.status()).toBe(403);
  expect(wall.blocks.map((b) => b.reason)).toEqual(['session-user-agent']);

  expect((await page.goto(url))?.status()).toBe(200);
  expect((await page.goto(url))?.status()).toBe(200);
  const overRate = await page.goto(url);
  expect(overRate?.status()).toBe(403);
  expect(await overRate?.text()).toContain('Access denied');
  expect(wall.blocks.map((b) => b.reason)).toEqual(['session-user-agent', 'session-rate']);

  const node = await new Promise<number | undefined>((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port: wall.port, path: '/index.html', rejectUnauthorized: false }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('error', reject).end();
  });
  expect(node).toBe(403);
  expect(wall.blocks.at(-1)).toMatchObject({ reason: 'unknown-browser', remoteAddress: '127.0.0.1' });
}
