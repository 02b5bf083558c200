import { jest } from '@jest/globals';
import { authorized, dashboardAccess, isLoopbackHost } from '@crawlfleet/dashboard';
import { COUNTER_METRICS, FleetMetrics, Heartbeat, redisMemory } from '@crawlfleet/monitoring';
import { COUNTER_NAMES } from '@crawlfleet/crawl';

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('dashboard access', () => {
  test('loopback binds need no credentials; any other bind without them is refused (exit 2); half a pair is refused', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost']) expect(isLoopbackHost(host)).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.5', 'dashboard.example.com']) expect(isLoopbackHost(host)).toBe(false);
    expect(dashboardAccess('127.0.0.1', '', '')).toBeUndefined();
    expect(() => dashboardAccess('0.0.0.0', '', '')).toThrow(expect.objectContaining({ code: 'ERR_CONFIG', message: expect.stringContaining('refusing to serve 0.0.0.0') }));
    expect(() => dashboardAccess('127.0.0.1', 'admin', '')).toThrow(expect.objectContaining({ code: 'ERR_CONFIG' }));
    expect(dashboardAccess('0.0.0.0', 'admin', 's3cret')).toEqual({ user: 'admin', password: 's3cret' });
  });

  test('basic auth: the right pair only', () => {
    const creds = { user: 'admin', password: 'pa:ss' };
    expect(authorized(basic('admin', 'pa:ss'), creds)).toBe(true);
    expect(authorized(basic('admin', 'pa:s'), creds)).toBe(false);
    expect(authorized(basic('Admin', 'pa:ss'), creds)).toBe(false);
    expect(authorized(undefined, creds)).toBe(false);
    expect(authorized('Bearer x', creds)).toBe(false);
    expect(authorized('Basic !!!', creds)).toBe(false);
  });
});

describe('metrics', () => {
  test('every status counter has a metric of its own, and count() moves exactly those', async () => {
    expect(Object.keys(COUNTER_METRICS).sort()).toEqual([...COUNTER_NAMES].sort());
    const metrics = new FleetMetrics({ process: 'test' });
    metrics.count({ fetched: 2, items: 5 });
    metrics.count({ fetched: 1, skipped: -1, 'dead.fetch': 1 });
    metrics.response(404, 0.2, 1000);
    metrics.deadLetter('fetch', 'ERR_HTTP_STATUS');
    const text = await metrics.registry.metrics();
    expect(text).toContain('crawlfleet_pages_fetched_total{process="test"} 3');
    expect(text).toContain('crawlfleet_items_parsed_total{process="test"} 5');
    expect(text).toContain('crawlfleet_http_responses_total{status_class="4xx",process="test"} 1');
    expect(text).toContain('crawlfleet_downloaded_bytes_total{process="test"} 1000');
    expect(text).toContain('crawlfleet_dead_letters_total{stage="fetch",code="ERR_HTTP_STATUS",process="test"} 1');
    // Node's own metrics keep their standard names.
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds\{process="test"\} /m);
    expect(text).toMatch(/^process_cpu_seconds_total\{process="test"\} /m);
    expect(text).not.toContain('crawlfleet_nodejs_');
  });

  test('the heartbeat reports a stall of the event loop, and remembers it for its window', () => {
    // On jest's clock: a loaded machine's timers come late, and a real clock read that as a stall.
    jest.useFakeTimers({ now: 1_000_000 });
    try {
      const beat = new Heartbeat(20, 1000);
      jest.advanceTimersByTime(60);
      expect(beat.stalledMs()).toBe(0);
      // The loop blocked for 300 ms: the clock moves and no timer runs.
      jest.setSystemTime(Date.now() + 300);
      expect(beat.stalledMs()).toBe(300 - 20);
      // The next beat, 20 ms after the loop is free, records the gap between beats (320 ms) less the
      // interval; it is remembered for the window, then forgotten.
      jest.advanceTimersByTime(60);
      expect(beat.stalledMs()).toBe(300);
      jest.advanceTimersByTime(1100);
      expect(beat.stalledMs()).toBe(0);
      beat.stop();
    } finally {
      jest.useRealTimers();
    }
  });
});

test("Redis's memory and its maxmemory from INFO memory, for the alert near maxmemory", () => {
  const info = '# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nused_memory_rss:4194304\r\nmaxmemory:1073741824\r\nmaxmemory_human:1.00G\r\n';
  expect(redisMemory(info)).toEqual({ used: 1048576, max: 1073741824 });
  expect(redisMemory('used_memory:5\r\nmaxmemory:0\r\n')).toEqual({ used: 5, max: 0 });
});
