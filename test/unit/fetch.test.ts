import { validateSpider } from '@crawlfleet/core';
import { assertUrlAddressAllowed, classifyResponse, decodeBody, encodeBody, isHtml, isPublicAddress, UserAgentRotation, DEFAULT_USER_AGENTS } from '@crawlfleet/fetch';

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
  test('a block is a 403 or 429, a page whose text matches a block pattern, or a body under blockMinBytes', () => {
    expect(classifyResponse(page(403), spider)).toEqual({ kind: 'blocked', reason: 'blocked: HTTP 403' });
    expect(classifyResponse(page(200, '<html><body><p>Please solve this CAPTCHA to continue</p></body></html>'), spider)).toEqual({ kind: 'blocked', reason: 'blocked: the page says "captcha"' });
    expect(classifyResponse(page(200, '<title>Sorry</title><b>Our systems have detected Unusual   traffic</b>'), spider).kind).toBe('blocked');
    expect(classifyResponse(page(200, ''), spider)).toEqual({ kind: 'blocked', reason: 'blocked: a 0-byte body (blockMinBytes 1)' });
    const strict = validateSpider({ name: 'x', blockMinBytes: 100, blockPatterns: ['go away'] });
    expect(classifyResponse(page(200, '<p>tiny</p>'), strict).kind).toBe('blocked');
    expect(classifyResponse(page(200, `<p>${'fine '.repeat(30)}</p><p>captcha</p>`), strict).kind).toBe('ok');
    expect(classifyResponse(page(200, `<p>${'x'.repeat(100)} GO AWAY</p>`), strict).kind).toBe('blocked');
  });
  test('block patterns read the visible text: a page that loads a reCAPTCHA script, or names one in a comment or attribute, is not a block', () => {
    const body = '<html><head><script src="https://www.google.com/recaptcha/api.js"></script><script>var captcha = 1;</script><style>.captcha{}</style></head><body><!-- captcha --><form class="captcha"><p>Sign up for our newsletter</p></form></body></html>';
    expect(classifyResponse(page(200, body), spider).kind).toBe('ok');
    // Patterns apply to HTML only: a JSON or text body that says "captcha" is data.
    expect(classifyResponse(page(200, '{"captcha": true}', 'application/json'), spider).kind).toBe('ok');
  });
  test('HTML is told by content type, or sniffed when there is none', () => {
    expect(isHtml('text/html; charset=utf-8', Buffer.from(''))).toBe(true);
    expect(isHtml('application/json', Buffer.from('<html>'))).toBe(false);
    expect(isHtml(undefined, Buffer.from('  <!DOCTYPE html><html>'))).toBe(true);
  });
});

describe('page bodies cross Redis compressed', () => {
  test('round trip, smaller than the page, and a decompression bomb is capped', () => {
    const page = Buffer.from('<html>' + 'hello world '.repeat(10_000) + '</html>');
    const encoded = encodeBody(page);
    expect(encoded.length).toBeLessThan(page.length / 10);
    expect(decodeBody(encoded).equals(page)).toBe(true);
    expect(() => decodeBody(encodeBody(Buffer.alloc(2_000_000)), 1_000_000)).toThrow();
  });
});

test('user agents rotate: the spider list, else the environment, else the built-in pool', () => {
  const r = new UserAgentRotation(['env-a', 'env-b']);
  expect([r.pick(), r.pick(), r.pick()]).toEqual(['env-a', 'env-b', 'env-a']);
  expect(r.pick(['spider'])).toBe('spider');
  expect(DEFAULT_USER_AGENTS).toContain(new UserAgentRotation([]).pick());
});
