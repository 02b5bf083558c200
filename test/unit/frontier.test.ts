import { allowedHosts, canonicalizeUrl, frontierTake, hostAllowed, hostOfUrl, passesAllowDeny, scopeVerdict } from '@crawlfleet/frontier';

describe('canonicalizeUrl', () => {
  test.each([
    ['http://Example.COM/a#frag', 'http://example.com/a'],
    ['HTTP://example.com:80/a', 'http://example.com/a'],
    ['https://example.com:443/a', 'https://example.com/a'],
    ['http://example.com:8080/a', 'http://example.com:8080/a'],
    ['http://example.com/a/./b/../c', 'http://example.com/a/c'],
    ['http://example.com//a///b', 'http://example.com/a/b'],
    ['http://example.com', 'http://example.com/'],
    ['http://example.com/?', 'http://example.com/'],
    ['http://example.com/p?b=2&a=1#x', 'http://example.com/p?b=2&a=1'],
    ['http://user:pw@example.com/a', 'http://example.com/a'],
  ])('%s -> %s', (input, expected) => {
    expect(canonicalizeUrl(input)).toBe(expected);
  });

  test('resolves relative links against a base', () => {
    expect(canonicalizeUrl('../p-1.html#top', 'http://h:1/catalogue/page-1.html')).toBe('http://h:1/p-1.html');
    expect(canonicalizeUrl('p-1.html', 'http://h:1/product/')).toBe('http://h:1/product/p-1.html');
  });

  test.each(['mailto:a@b.c', 'javascript:void(0)', 'ftp://x/y', 'http://'])('refuses %s', (input) => {
    expect(canonicalizeUrl(input, 'http://h/')).toBeUndefined();
  });
});

describe('scope', () => {
  test('host:port entries match that port only; host entries match any port and subdomains', () => {
    expect(hostAllowed('http://127.0.0.1:8080/x', ['127.0.0.1:8080'])).toBe(true);
    expect(hostAllowed('http://127.0.0.1:8081/x', ['127.0.0.1:8080'])).toBe(false);
    expect(hostAllowed('http://shop.example.com/x', ['example.com'])).toBe(true);
    expect(hostAllowed('http://example.com:81/x', ['example.com'])).toBe(true);
    expect(hostAllowed('http://badexample.com/x', ['example.com'])).toBe(false);
  });

  test('allowedDomains defaults to the hosts of the start URLs', () => {
    expect(allowedHosts({ startUrls: ['http://a.com/x', 'http://b.com:81/'], allowedDomains: undefined, sitemapUrls: undefined })).toEqual(['a.com', 'b.com:81']);
  });

  test('scopeVerdict', () => {
    expect(scopeVerdict('http://a.com/x', 3, { maxDepth: 3 }, ['a.com'])).toBe('admit');
    expect(scopeVerdict('http://a.com/x', 4, { maxDepth: 3 }, ['a.com'])).toBe('too-deep');
    expect(scopeVerdict('http://b.com/x', 1, { maxDepth: undefined }, ['a.com'])).toBe('out-of-scope');
  });

  test('allow and deny', () => {
    expect(passesAllowDeny('http://a/x.html', [/\.html$/], [/\/_sources\//])).toBe(true);
    expect(passesAllowDeny('http://a/_sources/x.html', [/\.html$/], [/\/_sources\//])).toBe(false);
    expect(passesAllowDeny('http://a/x.txt', [/\.html$/], [])).toBe(false);
    expect(passesAllowDeny('http://a/x.txt', [], [])).toBe(true);
  });
});

describe('hostOfUrl: the host the frontier keys queues and partitions by', () => {
  test.each([
    'http://example.com/a',
    'https://example.com:8443/a?b#c',
    'http://example.com',
    'http://127.0.0.1:8080/x',
    'http://[::1]:8080/x',
    'http://[2001:db8::1]/',
    'http://xn--bcher-kva.example/',
    'http://Example.COM/a',
    'http://user:pw@example.com/a',
    'http://a.b@c.example/',
    'http://bücher.example/',
    'http://example.com?q',
    'http://example.com#f',
  ])('%s: what the WHATWG parser says, canonical or not', (url) => {
    expect(hostOfUrl(url)).toBe(new URL(url).hostname);
    const canonical = canonicalizeUrl(url);
    if (canonical) expect(hostOfUrl(canonical)).toBe(new URL(canonical).hostname);
  });

  test('a string that is not a URL has no host', () => {
    expect(hostOfUrl('not a url')).toBe('');
  });
});

describe('frontierTake', () => {
  test("each partition gets its share of the window, never below the spider's widest host, in batches of a 32nd", () => {
    expect(frontierTake(2000)).toEqual({ window: 2000, minBatch: 63, horizonMs: 60_000 });
    expect(frontierTake(2000, 16)).toEqual({ window: 125, minBatch: 4, horizonMs: 60_000 });
    expect(frontierTake(2000, 16, 200)).toEqual({ window: 200, minBatch: 7, horizonMs: 60_000 });
  });
});
