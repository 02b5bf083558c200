import { validateSpider } from '@crawlfleet/core';
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import {
  assertUrlAddressAllowed,
  classifyResponse,
  contentCodings,
  decodeContentEncoding,
  decodeBody,
  decodeHtml,
  encodeBody,
  isHtml,
  isInlineRedirect,
  isPublicAddress,
  UserAgentRotation,
  identityHeaders,
} from '@crawlfleet/fetch';

describe('SSRF guard', () => {
  test.each(['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '::1', 'fe80::1', 'fc00::1', '0.0.0.0', '::ffff:127.0.0.1', '100.64.0.1'])('%s is not public', (ip) => {
    expect(isPublicAddress(ip)).toBe(false);
  });
  test.each(['8.8.8.8', '93.184.216.34', '2606:4700:4700::1111'])('%s is public', (ip) => {
    expect(isPublicAddress(ip)).toBe(true);
  });
  test('IP literals and localhost are refused unless private addresses are allowed', () => {
    expect(() => assertUrlAddressAllowed(new URL('http://127.0.0.1:8080/'), false)).toThrow(expect.objectContaining({ code: 'ERR_FORBIDDEN_ADDRESS' }));
    expect(() => assertUrlAddressAllowed(new URL('http://[::1]/'), false)).toThrow(expect.objectContaining({ code: 'ERR_FORBIDDEN_ADDRESS' }));
    expect(() => assertUrlAddressAllowed(new URL('http://localhost/'), false)).toThrow(expect.objectContaining({ code: 'ERR_FORBIDDEN_ADDRESS' }));
    expect(() => assertUrlAddressAllowed(new URL('http://127.0.0.1/'), true)).not.toThrow();
    expect(() => assertUrlAddressAllowed(new URL('http://8.8.8.8/'), false)).not.toThrow();
  });
});

describe('response classification', () => {
  const spider = validateSpider({ name: 'x' });
  const page = (status: number, body = '<html><body><h1>A real page</h1></body></html>', contentType = 'text/html') => ({ status, contentType, body: Buffer.from(body) });
  test.each([
    [200, 'ok'],
    [204, 'ok'],
    [404, 'fail'],
    [403, 'blocked'],
    [429, 'blocked'],
    [503, 'retry'],
    [524, 'retry'],
    [501, 'fail'],
  ] as const)('HTTP %i -> %s', (status, kind) => {
    expect(classifyResponse(page(status), spider).kind).toBe(kind);
  });
  test('a block is a 403 or 429, a short page whose title or text matches a block pattern, or a body under blockMinBytes', () => {
    expect(classifyResponse(page(403), spider)).toEqual({ kind: 'blocked', signal: 'http-403', reason: 'blocked: HTTP 403' });
    expect(classifyResponse(page(200, '<html><body><p>Please solve this CAPTCHA to continue</p></body></html>'), spider)).toEqual({
      kind: 'blocked',
      signal: 'pattern',
      reason: 'blocked: the page says "captcha"',
    });
    expect(classifyResponse(page(200, '<title>Sorry</title><b>Our systems have detected Unusual   traffic</b>'), spider).kind).toBe('blocked');
    expect(classifyResponse(page(200, '<title>Access Denied</title><h1>Nope</h1>'), spider).kind).toBe('blocked');
    expect(classifyResponse(page(200, ''), spider)).toEqual({ kind: 'blocked', signal: 'empty', reason: 'blocked: a 0-byte body (blockMinBytes 1)' });
    const strict = validateSpider({ name: 'x', blockMinBytes: 100, blockPatterns: ['go away'] });
    expect(classifyResponse(page(200, '<p>tiny</p>'), strict).kind).toBe('blocked');
    expect(classifyResponse(page(200, `<p>${'fine '.repeat(30)}</p><p>captcha</p>`), strict).kind).toBe('ok');
    expect(classifyResponse(page(200, `<p>${'x'.repeat(100)} GO AWAY</p>`), strict).kind).toBe('blocked');
  });
  test('a pattern in the prose of a long page is content, however it is worded; blockPageMaxChars sets what is long', () => {
    const prose = '<p>The server answers with an error when the account lacks rights to the table. </p>'.repeat(30);
    const manual = `<html><head><title>Troubleshooting connections</title></head><body>${prose}<p>Error 1045: Access denied for user.</p>${prose}</body></html>`;
    expect(classifyResponse(page(200, manual), spider)).toEqual({ kind: 'ok' });
    const short = validateSpider({ name: 'x', blockPageMaxChars: 100 });
    expect(classifyResponse(page(200, '<title>Access denied</title><p>Sorry, no.</p>'), short).kind).toBe('blocked');
    expect(classifyResponse(page(200, `<title>Access denied</title><p>${'word '.repeat(30)}</p>`), short).kind).toBe('ok');
  });
  test('block patterns read the visible text: a page that loads a reCAPTCHA script, or names one in a comment or attribute, is not a block', () => {
    const body =
      '<html><head><script src="https://www.google.com/recaptcha/api.js"></script><script>var captcha = 1;</script><style>.captcha{}</style></head><body><!-- captcha --><form class="captcha"><p>Sign up for our newsletter</p><input type="email" name="email"><div class="g-recaptcha" data-sitekey="x"></div></form></body></html>';
    expect(classifyResponse(page(200, body), spider).kind).toBe('ok');
    // Patterns apply to HTML only: a JSON or text body that says "captcha" is data.
    expect(classifyResponse(page(200, '{"captcha": true}', 'application/json'), spider).kind).toBe('ok');
  });
  test('a redirect that reaches the classifier (another origin) is a redirect; its Location resolves against the URL that sent it', () => {
    const redirect = (status: number, location: string | undefined) => ({ ...page(status, ''), url: 'http://a.test/x/y', headers: location === undefined ? {} : { location } });
    expect(classifyResponse(redirect(301, 'http://b.test/z'), spider)).toEqual({ kind: 'redirect', location: 'http://b.test/z' });
    expect(classifyResponse(redirect(302, '//c.test/'), spider)).toEqual({ kind: 'redirect', location: 'http://c.test/' });
    expect(classifyResponse(redirect(308, 'https://a.test/\xc3\xa9t\xc3\xa9'), spider)).toEqual({ kind: 'redirect', location: 'https://a.test/%C3%A9t%C3%A9' });
    expect(classifyResponse(redirect(302, undefined), spider)).toEqual({ kind: 'fail', reason: 'HTTP 302' });
    expect(classifyResponse(redirect(302, 'mailto:x@y'), spider)).toEqual({ kind: 'fail', reason: 'HTTP 302' });
    expect(classifyResponse(redirect(304, 'http://b.test/'), spider)).toEqual({ kind: 'fail', reason: 'HTTP 304' });
  });
  test('HTML is told by content type, or sniffed when there is none', () => {
    expect(isHtml('text/html; charset=utf-8', Buffer.from(''))).toBe(true);
    expect(isHtml('application/json', Buffer.from('<html>'))).toBe(false);
    expect(isHtml(undefined, Buffer.from('  <!DOCTYPE html><html>'))).toBe(true);
    expect(isHtml(undefined, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('<html><body>', 'utf16le')]))).toBe(true);
    expect(isHtml(undefined, Buffer.from('{"a": 1}'))).toBe(false);
  });
  test('only a same-origin redirect is followed inline', () => {
    const u = (s: string) => new URL(s);
    expect(isInlineRedirect(u('http://a.test/x'), u('http://a.test/y?z'))).toBe(true);
    expect(isInlineRedirect(u('http://a.test/x'), u('https://a.test/x'))).toBe(false);
    expect(isInlineRedirect(u('http://a.test/x'), u('http://a.test:8080/x'))).toBe(false);
    expect(isInlineRedirect(u('http://a.test/x'), u('http://b.a.test/x'))).toBe(false);
  });
});

describe('page bodies cross Redis compressed', () => {
  test('round trip, smaller than the page, and a decompression bomb is capped', () => {
    const page = Buffer.from(`<html>${'hello world '.repeat(10_000)}</html>`);
    const encoded = encodeBody(page);
    expect(encoded.length).toBeLessThan(page.length / 10);
    expect(decodeBody(encoded).equals(page)).toBe(true);
    expect(() => decodeBody(encodeBody(Buffer.alloc(2_000_000)), 1_000_000)).toThrow();
  });

  test('a parse job written by an older fetcher (gzip, base64) still decodes, and so does a GBK body, byte for byte', () => {
    const page = Buffer.from(`<html>${'hello world '.repeat(1_000)}</html>`);
    expect(decodeBody(gzipSync(page, { level: 6 }).toString('base64')).equals(page)).toBe(true);
    expect(() => decodeBody(gzipSync(Buffer.alloc(2_000_000)).toString('base64'), 1_000_000)).toThrow();
    const gbk = Buffer.from('3c7469746c653ec4e3bac3a3accac0bde73c2f7469746c653e', 'hex'); // <title>你好，世界</title> in GBK
    expect(decodeBody(encodeBody(gbk)).equals(gbk)).toBe(true);
    expect(decodeHtml(decodeBody(encodeBody(gbk)), 'text/html; charset=gbk')).toBe('<title>你好，世界</title>');
  });
});

test('user agents rotate: the spider list, else the environment, else generated browsers', () => {
  const r = new UserAgentRotation(['env-a', 'env-b']);
  expect([r.pick(), r.pick(), r.pick()]).toEqual(['env-a', 'env-b', 'env-a']);
  expect(r.pick(['spider'])).toBe('spider');
  // A given user agent keeps plain Accept headers: no client hints of a browser it may not be.
  expect(identityHeaders('spider')).toEqual({ 'user-agent': 'spider', accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', 'accept-language': 'en-US,en;q=0.8' });

  const generated = new UserAgentRotation([]);
  const agents = Array.from({ length: 24 }, () => generated.pick());
  expect(new Set(agents).size).toBeGreaterThan(5);
  for (const agent of agents) {
    const h = identityHeaders(agent);
    expect({ agent, ua: h['user-agent'], accept: h.accept?.startsWith('text/html'), encoding: h['accept-encoding'], connection: h.connection }).toEqual({
      agent,
      ua: agent,
      accept: true,
      encoding: 'gzip, deflate, br',
      connection: undefined,
    });
    expect(agent).toMatch(/^Mozilla\/5\.0 \((Windows|Macintosh|X11)/);
    // Client hints, where the browser sends them, name the user agent's own major version; Firefox sends none.
    const chrome = /Chrome\/(\d+)\./.exec(agent)?.[1];
    if (h['sec-ch-ua'] !== undefined) expect({ agent, hints: h['sec-ch-ua'] }).toEqual({ agent, hints: expect.stringContaining(`v="${chrome}"`) });
    if (/Firefox\//.test(agent)) expect(h['sec-ch-ua']).toBeUndefined();
  }
});

describe('Content-Encoding undone from the wire bytes (WARC crawls keep both)', () => {
  const page = Buffer.from(`<html><body>${'é'.repeat(3000)}</body></html>`);

  test('gzip, x-gzip, deflate (zlib-wrapped and raw, as some servers send it), br, and identity', () => {
    expect(decodeContentEncoding(gzipSync(page), 'gzip', 1e6, 'u')).toEqual(page);
    expect(decodeContentEncoding(gzipSync(page), 'X-Gzip', 1e6, 'u')).toEqual(page);
    expect(decodeContentEncoding(deflateSync(page), 'deflate', 1e6, 'u')).toEqual(page);
    expect(decodeContentEncoding(deflateRawSync(page), 'deflate', 1e6, 'u')).toEqual(page);
    expect(decodeContentEncoding(brotliCompressSync(page), 'br', 1e6, 'u')).toEqual(page);
    expect(decodeContentEncoding(page, 'identity', 1e6, 'u')).toBe(page);
    expect(decodeContentEncoding(page, undefined, 1e6, 'u')).toBe(page);
  });

  test('stacked codings are undone outermost first; an unknown coding leaves the body as it came', () => {
    expect(contentCodings('deflate, gzip')).toEqual(['deflate', 'gzip']);
    expect(decodeContentEncoding(gzipSync(deflateSync(page)), 'deflate, gzip', 1e6, 'u')).toEqual(page);
    expect(decodeContentEncoding(page, 'compress', 1e6, 'u')).toBe(page);
  });

  test('a body larger than the cap once decoded is refused for good; one that does not decode may be retried', () => {
    expect(() => decodeContentEncoding(gzipSync(page), 'gzip', 100, 'u')).toThrow(expect.objectContaining({ code: 'ERR_RESPONSE_TOO_LARGE' }));
    expect(() => decodeContentEncoding(Buffer.from('not brotli at all'), 'br', 1e6, 'u')).toThrow(expect.objectContaining({ code: 'ERR_BODY_DECODE' }));
  });
});
