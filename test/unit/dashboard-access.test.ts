import { timingSafeEqual } from 'node:crypto';
import { authorized, type BufferCompare, hostName, hostRule, isAllowedHost, isAllowedOrigin, refusal } from '@crawlfleet/dashboard';

// What reaches the constant-time compare decides whether the check's time can leak: timingSafeEqual
// takes as long for any two buffers of one length, so a leak needs a call with inputs whose length
// follows the secret's, or a check that returns before comparing. The compare is recorded, not timed:
// a timing measure failed on a loaded CI machine with no bug (issue 29).
describe('the credential check tells nothing through its timing', () => {
  const expected = { user: 'ops', password: 'p'.repeat(40) };
  const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  const attempts = [
    ['the right credentials', basic('ops', 'p'.repeat(40)), true],
    ['a wrong password of the right length', basic('ops', 'q'.repeat(40)), false],
    ['a password one byte longer', basic('ops', 'p'.repeat(41)), false],
    ['a one-byte password', basic('ops', 'p'), false],
    ['an empty password', basic('ops', ''), false],
    ['a wrong user', basic('root', 'p'.repeat(40)), false],
    ['a wrong user and password', basic('r', 'x'.repeat(4000)), false],
  ] as const;

  /** Runs a check with a compare that records the lengths it was given. */
  function recorded(check: (header: string, compare: BufferCompare) => boolean, header: string) {
    const calls: [number, number][] = [];
    const compare: BufferCompare = (a, b) => {
      calls.push([a.length, b.length]);
      return timingSafeEqual(a, b);
    };
    return { result: check(header, compare), calls };
  }

  test.each(attempts)('%s: both the user and the password compared, as two 32-byte digests', (_, header, ok) => {
    const { result, calls } = recorded((h, compare) => authorized(h, expected, compare), header);
    expect(result).toBe(ok);
    expect(calls).toEqual([
      [32, 32],
      [32, 32],
    ]);
  });

  test('the record sees the leak it guards against: a length check before the compare, or the strings compared', () => {
    const password = (header: string) => Buffer.from(header.slice('Basic '.length), 'base64').toString('utf8').slice('ops:'.length);
    const lengthFirst = (header: string, compare: BufferCompare) => {
      const given = Buffer.from(password(header));
      const wanted = Buffer.from(expected.password);
      return given.length === wanted.length && compare(given, wanted);
    };
    const stringsCompared = (header: string, compare: BufferCompare) => {
      const given = Buffer.alloc(expected.password.length);
      given.write(password(header));
      return compare(given, Buffer.from(expected.password));
    };
    expect(recorded(lengthFirst, basic('ops', 'p')).calls).toEqual([]);
    expect(recorded(stringsCompared, basic('ops', 'p')).calls).toEqual([[40, 40]]);
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
