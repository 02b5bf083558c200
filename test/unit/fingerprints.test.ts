// The fingerprint site's readings (test/fixtures/fingerprint-site.mjs), on bytes built here from a
// fingerprint that a third party published: browserleaks.com's record of a Chrome 143 visit (its
// ja4, ja4_ro with the order sent, and akamai_text). If the parser or the hashing drifts from FoxIO's
// JA4 spec, the published value stops coming out.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { browserFamily, familiesFrom, identityOf, judgeVisit, sessionIdOf } from '../fixtures/bot-wall.mjs';
import { akamaiFingerprint, clientHelloFrom, http2Preamble, isGrease, ja4, parseClientHello } from '../fixtures/fingerprint-site.mjs';

const PUBLISHED = {
  ja4: 't13d1516h2_8daaf6152771_d8a2da3f94cd',
  ciphers: [0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014, 0x009c, 0x009d, 0x002f, 0x0035],
  extensions: [0x002d, 0x0033, 0x0010, 0xfe0d, 0x0017, 0x44cd, 0x0000, 0x000b, 0x000a, 0x002b, 0xff01, 0x0023, 0x0012, 0x0005, 0x000d, 0x001b],
  signatures: [0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601],
  akamai: '1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p',
};

const u16 = (n: number) => Buffer.from([n >> 8, n & 0xff]);
const u24 = (n: number) => Buffer.from([n >> 16, (n >> 8) & 0xff, n & 0xff]);
const list16 = (values: number[]) => Buffer.concat([u16(values.length * 2), ...values.map(u16)]);

function extensionBody(type: number): Buffer {
  if (type === 0x0000) {
    const name = Buffer.from('tls.browserleaks.com');
    return Buffer.concat([u16(name.length + 3), Buffer.from([0]), u16(name.length), name]);
  }
  if (type === 0x0010) {
    const protocols = Buffer.concat(['h2', 'http/1.1'].map((p) => Buffer.concat([Buffer.from([p.length]), Buffer.from(p)])));
    return Buffer.concat([u16(protocols.length), protocols]);
  }
  if (type === 0x002b) return Buffer.concat([Buffer.from([6]), u16(0x3a3a), u16(0x0304), u16(0x0303)]);
  if (type === 0x000d) return list16(PUBLISHED.signatures);
  return Buffer.from([0, 0]);
}

/** A ClientHello handshake message as Chrome sends it: GREASE first among ciphers and extensions. */
function chromeClientHello(): Buffer {
  const extensions = [0x0a0a, ...PUBLISHED.extensions, 0x1a1a].map((type) => {
    const body = extensionBody(type);
    return Buffer.concat([u16(type), u16(body.length), body]);
  });
  const extensionBytes = Buffer.concat(extensions);
  const body = Buffer.concat([
    u16(0x0303),
    Buffer.alloc(32, 7),
    Buffer.from([32]),
    Buffer.alloc(32, 9),
    list16([0x2a2a, ...PUBLISHED.ciphers]),
    Buffer.from([1, 0]),
    u16(extensionBytes.length),
    extensionBytes,
  ]);
  return Buffer.concat([Buffer.from([1]), u24(body.length), body]);
}

const record = (fragment: Buffer) => Buffer.concat([Buffer.from([22, 3, 1]), u16(fragment.length), fragment]);

describe('the fingerprint site reads a ClientHello as JA4 does', () => {
  test('GREASE values are recognised and only they', () => {
    expect([0x0a0a, 0x1a1a, 0xfafa].every(isGrease)).toBe(true);
    expect([0x0a1a, 0x1301, 0x0000, 0xff01, 0x4469].some(isGrease)).toBe(false);
  });

  test('the published Chrome 143 visit gives its published JA4', () => {
    const hello = parseClientHello(chromeClientHello());
    expect(hello.sni).toBe('tls.browserleaks.com');
    expect(hello.alpn).toEqual(['h2', 'http/1.1']);
    expect(ja4(hello).ja4).toBe(PUBLISHED.ja4);
    expect(ja4(hello).raw.split('_')[0]).toBe('t13d1516h2');
  });

  test('without SNI, ALPN or supported_versions the a part says so', () => {
    const hello = { legacyVersion: 0x0303, ciphers: [0x1301], extensions: [0x000d], sni: undefined, alpn: [], supportedVersions: [], signatureAlgorithms: [0x0403] };
    expect(ja4(hello).raw).toBe('t12i010100_1301_000d_0403');
  });

  test('a ClientHello split over two records and over reads is whole only at its last byte', () => {
    const message = chromeClientHello();
    const bytes = Buffer.concat([record(message.subarray(0, 100)), record(message.subarray(100))]);
    for (const cut of [3, 50, 105, 110, bytes.length - 1]) expect(clientHelloFrom(bytes.subarray(0, cut))).toBeUndefined();
    expect(clientHelloFrom(bytes)).toEqual(message);
    expect(() => clientHelloFrom(Buffer.from('GET / HTTP/1.1\r\n'))).toThrow('not a TLS handshake record');
  });

  test('a truncated ClientHello is refused with where it ended', () => {
    expect(() => parseClientHello(chromeClientHello().subarray(0, 60))).toThrow(/ClientHello truncated at byte/);
  });
});

describe('the fingerprint site reads an HTTP/2 preamble as Akamai does', () => {
  const frame = (type: number, flags: number, stream: number, payload: Buffer) =>
    Buffer.concat([u24(payload.length), Buffer.from([type, flags]), Buffer.from([stream >> 24, stream >> 16, stream >> 8, stream].map((b) => b & 0xff)), payload]);
  const settings = (pairs: [number, number][]) =>
    Buffer.concat(pairs.map(([id, value]) => Buffer.concat([u16(id), Buffer.from([value >>> 24, (value >> 16) & 0xff, (value >> 8) & 0xff, value & 0xff])])));
  const preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
  const chromeFrames = Buffer.concat([
    preface,
    frame(
      4,
      0,
      0,
      settings([
        [1, 65536],
        [2, 0],
        [4, 6291456],
        [6, 262144],
      ]),
    ),
    frame(8, 0, 0, Buffer.from([0x00, 0xef, 0x00, 0x01])),
    frame(1, 0x24, 1, Buffer.concat([Buffer.from([0x80, 0, 0, 0, 255]), Buffer.from('hpack')])),
  ]);

  test("Chrome's frames give the published akamai text with Chrome's pseudo-header order", () => {
    const preamble = http2Preamble(chromeFrames)!;
    expect(preamble.windowUpdate).toBe(15663105);
    expect(preamble.headersPriority).toEqual({ stream: 1, exclusive: true, dependsOn: 0, weight: 256 });
    expect(akamaiFingerprint(preamble, [':method', ':authority', ':scheme', ':path'])).toBe(PUBLISHED.akamai);
  });

  test('it waits for the first HEADERS frame and refuses a connection without the preface', () => {
    expect(http2Preamble(chromeFrames.subarray(0, chromeFrames.length - 3))).toBeUndefined();
    expect(http2Preamble(chromeFrames.subarray(0, 10))).toBeUndefined();
    expect(() => http2Preamble(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'))).toThrow('no HTTP/2 connection preface');
  });
});

describe('the bot wall judges a visit by the family its User-Agent claims (pure)', () => {
  const references = JSON.parse(readFileSync(join(import.meta.dirname, '..', 'fixtures', 'reference', 'fingerprints.json'), 'utf8'));
  const families = familiesFrom(references);
  const limits = { maxRequests: 3, windowMs: 10_000 };
  const chromium = { ...references.chromium.visit, remoteAddress: '127.0.0.2' };
  const firefox = { ...references.firefox.visit, remoteAddress: '127.0.0.3' };
  const sessionOf = (visit: typeof chromium, times: number[] = []) => ({ userAgent: visit.userAgent, remoteAddress: visit.remoteAddress, times });

  test('the families come from the references', () => {
    expect(families.chromium).toEqual({ cipherHash: '8daaf6152771', protocol: 'h2', pseudoHeaderOrder: ':method,:authority,:scheme,:path' });
    expect(families.firefox.pseudoHeaderOrder).toBe(':method,:path,:authority,:scheme');
  });

  test.each([
    ['Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36 Edg/140.0.0.0', 'chromium'],
    ['Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0.0.0 Safari/537.36', 'chromium'],
    ['Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0', 'firefox'],
    ['Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15', undefined],
    ['crawlfleet/1.0 (+https://example.org/bot)', undefined],
    [undefined, undefined],
  ])('%s claims %s', (userAgent, family) => {
    expect(browserFamily(userAgent)).toBe(family);
  });

  test('each browser passes as itself, with no session and within its session', () => {
    expect(judgeVisit(chromium, undefined, families, limits, 0)).toEqual({ allow: true });
    expect(judgeVisit(firefox, undefined, families, limits, 0)).toEqual({ allow: true });
    expect(judgeVisit(chromium, sessionOf(chromium, [0, 1]), families, limits, 2)).toEqual({ allow: true });
  });

  test.each([
    ['a User-Agent of no known browser', { ...chromium, userAgent: 'got (https://github.com/sindresorhus/got)' }, 'unknown-browser'],
    ["Firefox's User-Agent on Chromium's TLS", { ...chromium, userAgent: firefox.userAgent }, 'tls-cipher-set'],
    ["Chromium's TLS over HTTP/1.1", { ...chromium, protocol: 'http/1.1', http2: undefined }, 'http-version'],
    ["Chromium's TLS with Firefox's pseudo-header order", { ...chromium, http2: { ...chromium.http2, pseudoHeaderOrder: firefox.http2.pseudoHeaderOrder } }, 'pseudo-header-order'],
  ])('%s is blocked', (_name, visit, reason) => {
    expect(judgeVisit(visit, undefined, families, limits, 0)).toEqual({ allow: false, reason });
  });

  test("a session's cookie sent with another User-Agent, from another address, or too often is blocked", () => {
    const otherChrome = chromium.userAgent.replace('156.0.0.0', '155.0.0.0');
    expect(judgeVisit({ ...chromium, userAgent: otherChrome }, sessionOf(chromium), families, limits, 0)).toEqual({ allow: false, reason: 'session-user-agent' });
    expect(judgeVisit({ ...chromium, remoteAddress: '127.0.0.4' }, sessionOf(chromium), families, limits, 0)).toEqual({ allow: false, reason: 'session-address' });
    expect(judgeVisit(chromium, sessionOf(chromium, [0, 1, 2]), families, limits, 9_999)).toEqual({ allow: false, reason: 'session-rate' });
    // the window slides: the request at 0 is out of it at 10,000
    expect(judgeVisit(chromium, sessionOf(chromium, [0, 1, 2]), families, limits, 10_000)).toEqual({ allow: true });
  });

  test("a session's cookie sent with the same User-Agent but other client hints or languages is blocked", () => {
    const hinted = { ...chromium, identity: identityOf({ 'sec-ch-ua': '"Chromium";v="156"', 'accept-language': 'en-US' }) };
    const session = { ...sessionOf(chromium), identity: hinted.identity };
    expect(judgeVisit(hinted, session, families, limits, 0)).toEqual({ allow: true });
    expect(judgeVisit({ ...hinted, identity: identityOf({ 'accept-language': 'en-US' }) }, session, families, limits, 0)).toEqual({ allow: false, reason: 'session-headers' });
  });

  test('the session cookie is read among others', () => {
    expect(sessionIdOf('a=1; wall_session=abc_-9; b=2')).toBe('abc_-9');
    expect(sessionIdOf('xwall_session=abc')).toBeUndefined();
    expect(sessionIdOf(undefined)).toBeUndefined();
  });
});
