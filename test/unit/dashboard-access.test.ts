import { timingSafeEqual } from 'node:crypto';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { authorized, hostName, hostRule, isAllowedHost, isAllowedOrigin, refusal } from '@crawlfleet/dashboard';

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
// A collection before each timed call: both checks allocate megabytes, and a collection landing in one
// call and not its pair was the noise (CI read gaps of 2.5 and 3.4 ms against a 2.3 ms bar). With it,
// under three busy loops on this 2-core machine, the digest check's gap reads 0.0–0.3 ms and a leaky
// check's 7–12 ms. (The thread's CPU time is no cure: Linux counts it in 4 ms ticks.)
v8.setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;
function elapsedMs(run: () => unknown): number {
  collectGarbage();
  const started = process.hrtime.bigint();
  run();
  return Number(process.hrtime.bigint() - started) / 1e6;
}

describe('the credential check tells nothing through its timing', () => {
  // A long password makes a byte-by-byte compare long enough to measure: it is what the length leak costs.
  const length = 8 * 1024 * 1024;
  const expected = { user: 'ops', password: 'p'.repeat(length) };
  const basic = (password: string) => `Basic ${Buffer.from(`ops:${password}`).toString('base64')}`;
  const rightLength = basic('q'.repeat(length));
  const oneLonger = basic('q'.repeat(length + 1));

  /** What comparing the passwords themselves takes, in ms: the length leak's size. */
  function compareMs(): number {
    const a = Buffer.alloc(length, 'q');
    const b = Buffer.alloc(length, 'p');
    return median(Array.from({ length: 15 }, () => elapsedMs(() => timingSafeEqual(a, b))));
  }

  /** The quietest of five rounds of the median difference between back-to-back pairs, in ms. */
  function lengthGap(check: (header: string) => boolean): number {
    const gaps: number[] = [];
    for (let round = 0; round < 5; round++) {
      const differences: number[] = [];
      for (let i = 0; i < 15; i++) {
        const same = elapsedMs(() => expect(check(rightLength)).toBe(false));
        const longer = elapsedMs(() => expect(check(oneLonger)).toBe(false));
        differences.push(same - longer);
      }
      gaps.push(Math.abs(median(differences)));
    }
    return Math.min(...gaps);
  }

  test('a wrong password of the right length takes as long as one a byte longer (SHA-256 digests compared, not the strings)', () => {
    // The gap against half of what comparing the strings themselves takes.
    expect(lengthGap((header) => authorized(header, expected))).toBeLessThan(compareMs() / 2);
  });

  test('the measure sees the leak it guards against: a length check before a constant-time compare', () => {
    const leaky = (header: string) => {
      const password = Buffer.from(Buffer.from(header.slice('Basic '.length), 'base64').toString('utf8').slice('ops:'.length));
      const wanted = Buffer.from(expected.password);
      return password.length === wanted.length && timingSafeEqual(password, wanted);
    };
    expect(lengthGap(leaky)).toBeGreaterThan(compareMs() / 2);
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
