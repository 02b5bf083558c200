import { ConfigError, ServiceUnavailableError, connectRedis, loadEnv, parseRedisUrl } from '@crawlfleet/core';

describe('REDIS_URL: one Redis, a Redis Cluster, or Sentinel (CONTRACT.md)', () => {
  test('redis:// and rediss:// are one Redis, the URL as ioredis reads it', () => {
    expect(parseRedisUrl('redis://:pw@127.0.0.1:6380/2')).toEqual({ mode: 'single', url: 'redis://:pw@127.0.0.1:6380/2' });
    expect(parseRedisUrl('rediss://cache.example:6380')).toEqual({ mode: 'single', url: 'rediss://cache.example:6380' });
  });

  test('redis+cluster:// lists the nodes; the credentials (percent-decoded) and TLS apply to every node', () => {
    expect(parseRedisUrl('redis+cluster://127.0.0.1:7000,127.0.0.1:7001,redis-2')).toEqual({
      mode: 'cluster',
      nodes: [
        { host: '127.0.0.1', port: 7000 },
        { host: '127.0.0.1', port: 7001 },
        { host: 'redis-2', port: 6379 },
      ],
      tls: false,
    });
    expect(parseRedisUrl('rediss+cluster://fleet:p%40ss@[::1]:7000,h2:7001')).toEqual({
      mode: 'cluster',
      nodes: [
        { host: '::1', port: 7000 },
        { host: 'h2', port: 7001 },
      ],
      tls: true,
      username: 'fleet',
      password: 'p@ss',
    });
  });

  test('redis+sentinel:// lists the sentinels (26379 by default) and names the primary after them', () => {
    expect(parseRedisUrl('redis+sentinel://:secret@s1,s2:26380/mymaster')).toEqual({
      mode: 'sentinel',
      nodes: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26380 },
      ],
      masterName: 'mymaster',
      tls: false,
      password: 'secret',
    });
    expect(parseRedisUrl('redis+sentinel://s1:26379/mymaster/3')).toMatchObject({ masterName: 'mymaster', db: 3 });
  });

  test('a wrong URL is a ConfigError that says what is wrong, and loadEnv names REDIS_URL', () => {
    const wrong = (url: string) => {
      try {
        parseRedisUrl(url);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message;
      }
      throw new Error(`${url} was accepted`);
    };
    expect(wrong('redis+sentinel://s1:26379,s2:26379')).toMatch(/names its primary after the hosts/);
    expect(wrong('redis+cluster://h1:7000,h2:port')).toMatch(/"h2:port" is not host:port/);
    expect(wrong('redis+cluster://h1:99999')).toMatch(/"h1:99999" is not host:port/);
    expect(wrong('redis+cluster://h1:7000/0')).toMatch(/a cluster URL has no path/);
    expect(wrong('http://h1:6379')).toMatch(/must start with redis:\/\/, rediss:\/\/, redis\+cluster:\/\//);
    expect(() => loadEnv({ REDIS_URL: 'redis+cluster://h1:port' })).toThrow(/invalid environment: REDIS_URL: "h1:port" is not host:port/);
    expect(loadEnv({ REDIS_URL: 'redis+cluster://h1:7000,h2:7001' }).redisUrl).toBe('redis+cluster://h1:7000,h2:7001');
  });

  test('a cluster nobody serves fails fast at start-up with the URL (credentials redacted) and the reason', async () => {
    const started = Date.now();
    const err = await connectRedis('redis+cluster://fleet:secret@127.0.0.1:1,127.0.0.1:2', undefined, { connectTimeoutMs: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceUnavailableError);
    expect((err as Error).message).toMatch(/^cannot reach Redis at redis\+cluster:\/\/\*\*\*:\*\*\*@127\.0\.0\.1:1,127\.0\.0\.1:2: /);
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
