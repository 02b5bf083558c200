// The fingerprint site (test/fixtures/fingerprint-site.mjs) against a real browser: Debian's Chromium
// visits it on loopback, and what the site records must match the reference recorded from the same
// browser (test/fixtures/reference/fingerprints.json, by record-fingerprints.mjs). When Debian has
// upgraded Chromium past the reference's version, the parts that hold across versions are checked and
// the test says to record the references again.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeTestCertificates, startFingerprintSite } from '../fixtures/fingerprint-site.mjs';
import { visitWithChromium } from '../fixtures/record-fingerprints.mjs';
import { ROOT } from '../helpers/cli.js';

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
