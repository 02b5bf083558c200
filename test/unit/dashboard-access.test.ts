import { timingSafeEqual } from 'node:crypto';
import { authorized, hostName, hostRule, isAllowedHost, isAllowedOrigin, refusal } from '@crawlfleet/dashboard';

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
function elapsedMs(run: () => unknown): number {
  const started = process.hrtime.bigint();
  run();
  return Number(process.hrtime.bigint() - started) / 1e6;
}

describe('the credential check tells nothing through its timing', () => {
  test('a wrong password of the right length takes as long as one a byte longer (SHA-256 digests compared, not the strings)', () => {
    // A long password makes a byte-by-byte compare long enough to measure: it is what the length leak costs.
    const length = 8 * 1024 * 1024;
    const expected = { user: 'ops', password: 'p'.repeat(length) };
    const basic = (password: string) => `Basic ${Buffer.from(`ops:${password}`).toString('base64')}`;
    const rightLength = basic('q'.repeat(length));
    const oneLonger = basic('q'.repeat(length + 1));
    const a = Buffer.alloc(length, 'q');
    const b = Buffer.alloc(length, 'p');
    const compareMs = median(Array.from({ length: 15 }, () => elapsedMs(() => timingSafeEqual(a, b))));
    // Rounds of back-to-back pairs; each round's gap is the median of the pairs' differences, which a
    // slow drift of the shared machine's speed cancels out of (a difference of two medians did not:
    // one round in a CI run read 3.5 ms). The quietest of five rounds counts.
    const gaps: number[] = [];
    for (let round = 0; round < 5; round++) {
      const differences: number[] = [];
      for (let i = 0; i < 15; i++) {
        const same = elapsedMs(() => expect(authorized(rightLength, expected)).toBe(false));
        const longer = elapsedMs(() => expect(authorized(oneLonger, expected)).toBe(false));
        differences.push(same - longer);
      }
      gaps.push(Math.abs(median(differences)));
    }
    // The gap, in ms, against half of what comparing the strings themselves takes.
    expect(Math.min(...gaps)).toBeLessThan(compareMs / 2);
  });
});

describe('which Host the dashboard answers (DNS rebinding)', () => {
  const open = hostRule('127.0.0.1', [], false);
  test.each([
    ['127.0.0.1:3000', true],
    ['localhost:3000', true],
    ['LOCALHOST.', true],
    ['dash.localhost:3000', true],
    ['[::1]:3000', true],
    ['10.1.2.3:3000', true],
    [undefined, true],
    ['evil.example:3000', false],
    ['localhost.evil.example', false],
    ['127.0.0.1.nip.io:3000', false],
    ['', false],
  ])('without credentials, %s: %s', (host, expected) => {
    expect(isAllowedHost(host, open)).toBe(expected);
  });

  test('the bind address and DASHBOARD_ALLOWED_HOSTS add names; `.name` takes the names under it; `*` any', () => {
    expect(isAllowedHost('dash.internal:3000', hostRule('dash.internal', [], false))).toBe(true);
    const listed = hostRule('127.0.0.1', ['Dash.Example', '.corp.example'], false);
    expect(['dash.example', 'corp.example:80', 'ops.corp.example', 'a.b.corp.example:1'].map((h) => isAllowedHost(h, listed))).toEqual([true, true, true, true]);
    expect(['sub.dash.example', 'evilcorp.example', 'corp.example.evil'].map((h) => isAllowedHost(h, listed))).toEqual([false, false, false]);
    expect(isAllowedHost('anything.example', hostRule('127.0.0.1', ['*'], false))).toBe(true);
  });

  test('with credentials any Host is answered unless a list is set', () => {
    expect(isAllowedHost('dash.corp.example', hostRule('0.0.0.0', [], true))).toBe(true);
    expect(isAllowedHost('dash.corp.example', hostRule('0.0.0.0', ['grafana.example'], true))).toBe(false);
  });

  test('hostName', () => {
    expect(['Example.COM:3000', '[::1]:80', '::1', '127.0.0.1', 'a.b.', ':3000'].map(hostName)).toEqual(['example.com', '::1', '::1', '127.0.0.1', 'a.b', undefined]);
  });
});

describe('where a change may come from (cross-site requests)', () => {
  const rule = hostRule('127.0.0.1', ['dash.example'], true);
  test.each([
    [undefined, '127.0.0.1:3000', true],
    ['http://127.0.0.1:3000', '127.0.0.1:3000', true],
    ['http://LOCALHOST:3000', 'localhost:3000', true],
    ['https://dash.example', '10.0.0.5:3000', true],
    ['http://127.0.0.1:3001', '127.0.0.1:3000', false],
    ['http://evil.example', '127.0.0.1:3000', false],
    ['http://evil.example:3000', 'evil.example:3000', true],
    ['null', '127.0.0.1:3000', false],
    ['not a url', '127.0.0.1:3000', false],
  ])('Origin %s, Host %s: %s', (origin, host, expected) => {
    expect(isAllowedOrigin(origin, host, rule)).toBe(expected);
  });

  test('refusal: the Host first, then the Origin of a change; reads need no Origin check', () => {
    const open = hostRule('127.0.0.1', [], false);
    expect(refusal({ method: 'GET', host: 'evil.example:3000', origin: undefined }, open)).toContain('"evil.example"');
    expect(refusal({ method: 'GET', host: '127.0.0.1:3000', origin: 'http://evil.example' }, open)).toBeUndefined();
    expect(refusal({ method: 'put', host: '127.0.0.1:3000', origin: 'http://evil.example' }, open)).toContain('refused a change sent from http://evil.example');
    expect(refusal({ method: 'DELETE', host: '127.0.0.1:3000', origin: 'http://127.0.0.1:3000' }, open)).toBeUndefined();
  });
});
