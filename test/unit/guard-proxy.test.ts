import { RefusalLog, connectTarget, forwardTarget, relayedHead, upgradeTarget } from '@crawlfleet/render';

describe("what the guard proxy relays of a site's answer (relayedHead, pure)", () => {
  test.each([
    [99, 'X', 'invalid'],
    [0, 'X', 'invalid'],
    [600, 'X', 'invalid'],
    [999, 'X', 'invalid'],
    [undefined, undefined, 'invalid'],
    [100, 'Continue', 'invalid'],
    [199, 'X', 'invalid'],
    [200, 'OK', 200],
    [404, 'Not Found', 404],
    [599, 'X', 599],
  ])('status %s: %s', (status, message, expected) => {
    const head = relayedHead(status, message, {});
    expect('invalid' in head ? 'invalid' : head.status).toBe(expected);
  });

  test('a reason phrase with DEL or another control character is dropped, the status kept; tab, space and obs-text are kept', () => {
    expect(relayedHead(200, 'O\x7fK', {})).toEqual({ status: 200, message: undefined, headers: {} });
    expect(relayedHead(200, 'O\x01K', {})).toEqual({ status: 200, message: undefined, headers: {} });
    expect(relayedHead(200, 'O\r\nK', {})).toEqual({ status: 200, message: undefined, headers: {} });
    expect(relayedHead(200, 'Très\tbien', {})).toEqual({ status: 200, message: 'Très\tbien', headers: {} });
  });

  test('hop-by-hop headers and headers Node would refuse to send are dropped', () => {
    const head = relayedHead(200, 'OK', { 'content-type': 'text/html', connection: 'close', 'transfer-encoding': 'chunked', 'x-bad': 'a\x7fb', 'set-cookie': ['a=1', 'b=2'] });
    expect(head).toEqual({ status: 200, message: 'OK', headers: { 'content-type': 'text/html', 'set-cookie': ['a=1', 'b=2'] } });
  });
});

describe("the guard proxy's targets (pure)", () => {
  test('a proxied request needs an absolute http URL with a port 1-65535', () => {
    expect(forwardTarget('http://a.test:8080/x?y')?.href).toBe('http://a.test:8080/x?y');
    expect(forwardTarget('/relative')).toBeUndefined();
    expect(forwardTarget('https://a.test/')).toBeUndefined();
    expect(forwardTarget('http://a.test:0/')).toBeUndefined();
  });
  test('CONNECT host:port, IPv6 in brackets, port 1-65535', () => {
    expect(connectTarget('a.test:443')).toEqual({ host: 'a.test', port: 443, path: '' });
    expect(connectTarget('[::1]:443')).toEqual({ host: '[::1]', port: 443, path: '' });
    for (const bad of ['a.test:0', 'a.test:99999', 'a.test', '::1:443', undefined]) expect(connectTarget(bad)).toBeUndefined();
  });
  test('a ws:// upgrade: host, port (80 by default) and path', () => {
    expect(upgradeTarget('http://a.test/socket?x=1')).toEqual({ host: 'a.test', port: 80, path: '/socket?x=1' });
    expect(upgradeTarget('ws://a.test:81/s')).toEqual({ host: 'a.test', port: 81, path: '/s' });
    expect(upgradeTarget('http://a.test:0/')).toBeUndefined();
  });
});

describe('the refusal log is bounded (RefusalLog, clock injected)', () => {
  const limits = { maxTargets: 100, linesPerWindow: 5, windowMs: 60_000 };

  test('10,000 distinct targets in one window: 5 lines, 100 targets kept, one summary when the window ends', () => {
    const log = new RefusalLog(limits);
    let lines = 0;
    for (let i = 0; i < 10_000; i++) if (log.note(`10.0.${i >> 8}.${i & 255}:80`, 1_000 + i).log) lines++;
    expect({ lines, kept: log.size, total: log.total }).toEqual({ lines: 5, kept: 100, total: 10_000 });
    expect(log.pendingUntil()).toBe(61_000);
    expect(log.flush(60_999)).toBeUndefined();
    expect(log.flush(61_000)).toEqual({ refused: 10_000, unlogged: 9_995, windowMs: 60_000 });
    expect(log.flush(200_000)).toBeUndefined();
  });

  test('a target refused again gets no second line; a new window logs new targets again, and the refusal after a window carries its summary', () => {
    const log = new RefusalLog(limits);
    expect(log.note('a:80', 0).log).toBe(true);
    expect(log.note('a:80', 1).log).toBe(false);
    for (const t of ['b', 'c', 'd', 'e', 'f', 'g']) log.note(`${t}:80`, 2);
    expect(log.note('h:80', 60_000)).toEqual({ log: true, summary: { refused: 8, unlogged: 3, windowMs: 60_000 } });
    expect(log.pendingUntil()).toBeUndefined();
  });

  test('a window where every refusal got its line ends without a summary', () => {
    const log = new RefusalLog(limits);
    log.note('a:80', 0);
    log.note('b:80', 10);
    expect(log.pendingUntil()).toBeUndefined();
    expect(log.flush(100_000)).toBeUndefined();
  });
});
