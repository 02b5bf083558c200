import { Writable } from 'node:stream';
import { pino } from 'pino';
import {
  ConfigError,
  createLogger,
  encodeUrlCredentials,
  loadEnv,
  mongoServerKey,
  mongoSinkSpec,
  mongoUrlForSink,
  redactDeep,
  redactUrl,
  storableSinkSpec,
  stripUrlCredentials,
  validateSpider,
} from '@crawlfleet/core';
import { flatHeaders, isCredentialHeader } from '@crawlfleet/fetch';
import { openSink } from '@crawlfleet/storage';

describe('redactUrl: the user-info ends at the last @ before the host', () => {
  test.each([
    ['redis://:p@ss@host:6379/0', 'redis://***:***@host:6379/0'],
    ['redis://user:p@ss@host', 'redis://***:***@host'],
    ['redis://:p@s:s/w@127.0.0.1:6379', 'redis://***:***@127.0.0.1:6379'],
    ['mongodb://crawler:pa/ss@db.internal:27017/crawlfleet', 'mongodb://***:***@db.internal:27017/crawlfleet'],
    ['mongodb://crawler:a:b:c@h1:27017,h2:27018/db?replicaSet=rs', 'mongodb://***:***@h1:27017,h2:27018/db?replicaSet=rs'],
    ['http://u:p%40ss%3Aw%2Frd@127.0.0.1:3128', 'http://***:***@127.0.0.1:3128'],
    ['http://only-user@proxy:3128', 'http://***:***@proxy:3128'],
    ['redis://:/leading-slash@host', 'redis://***:***@host'],
    ['redis://:@@@@host', 'redis://***:***@host'],
    // the error line of a failed connection: the URL runs into its own message
    ['cannot reach Redis at redis://:p@ss/w@127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1', 'cannot reach Redis at redis://***:***@127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1'],
    // two URLs in one string, with and without a separator
    ['a redis://u:p@ss@h1 b http://x:y/z@h2 c', 'a redis://***:***@h1 b http://***:***@h2 c'],
    ['http://a:p@1@h1,http://b:p@2@h2', 'http://***:***@h1,http://***:***@h2'],
    ['{"url":"redis://:p@ss@h","n":1}', '{"url":"redis://***:***@h","n":1}'],
    // URLs without user-info are left as they are, even with an @ in their path
    ['http://plain.host/a', 'http://plain.host/a'],
    ['https://medium.com/@someone/a-post', 'https://medium.com/@someone/a-post'],
    ['http://example.com:8080/users/@me?x=a@b', 'http://example.com:8080/users/@me?x=a@b'],
    ['http://[::1]:8080/@x', 'http://[::1]:8080/@x'],
    ['mongodb://h1:27017,h2:27018/db?x=a@b', 'mongodb://h1:27017,h2:27018/db?x=a@b'],
    ['file:///tmp/@x', 'file:///tmp/@x'],
    ['no url at all, just an @ sign', 'no url at all, just an @ sign'],
  ])('%s', (input, expected) => {
    expect(redactUrl(input)).toBe(expected);
  });

  test('a long run of letters is scanned in linear time', () => {
    const long = `${'a'.repeat(200_000)} ${'a.'.repeat(100_000)}://x`;
    const started = process.hrtime.bigint();
    expect(redactUrl(long)).toBe(long);
    // quadratic scanning of 200,000 characters takes minutes; linear takes milliseconds
    expect(Number(process.hrtime.bigint() - started) / 1e9).toBeLessThan(10);
  });
});

describe('redactUrl: password-, secret- and token-like query parameters are hidden too', () => {
  test.each([
    ['redis://h/0?password=hunter2', 'redis://h/0?password=***'],
    ['cannot reach Redis at redis://127.0.0.1:6379/0?db=0&password=p@ss: WRONGPASS', 'cannot reach Redis at redis://127.0.0.1:6379/0?db=0&password=***: WRONGPASS'],
    ['redis://:pw@h/0?password=x', 'redis://***:***@h/0?password=***'],
    ['https://api.example/items?page=2&access_token=abc.def&sort=name', 'https://api.example/items?page=2&access_token=***&sort=name'],
    ['https://maps.example/js?key=AIzaSy&libraries=places', 'https://maps.example/js?key=***&libraries=places'],
    ['https://s3.example/o?X-Amz-Credential=AK%2F1&X-Amz-Signature=ff00&X-Amz-Security-Token=tt', 'https://s3.example/o?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Security-Token=***'],
    [
      'http://h/?api_key=1&API-KEY=2&apikey=3&client_secret=4&passwd=5&pwd=6&sig=7&auth=8&session_id=9',
      'http://h/?api_key=***&API-KEY=***&apikey=***&client_secret=***&passwd=***&pwd=***&sig=***&auth=***&session_id=***',
    ],
    [
      'mongodb://h/db?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:tok&tlsCertificateKeyFilePassword=pem',
      'mongodb://h/db?authMechanism=MONGODB-AWS&authMechanismProperties=***&tlsCertificateKeyFilePassword=***',
    ],
    ['http://h/p?token=abc#frag', 'http://h/p?token=***#frag'],
    ['{"url":"http://h/?secret=s3","n":1}', '{"url":"http://h/?secret=***","n":1}'],
    // names that only look alike, and parameters without a value, are left alone
    ['mongodb://h1,h2/db?replicaSet=rs&authSource=admin&readPreference=primary', 'mongodb://h1,h2/db?replicaSet=rs&authSource=admin&readPreference=primary'],
    ['https://shop.example/list?sort_key=price&monkey=1&keyword=lamp&passage=2&password', 'https://shop.example/list?sort_key=price&monkey=1&keyword=lamp&passage=2&password'],
    ['http://h/?token=', 'http://h/?token='],
    ['the word password=x outside a URL', 'the word password=x outside a URL'],
  ])('%s', (input, expected) => {
    expect(redactUrl(input)).toBe(expected);
  });
});

describe("a code spider's page.headers: the response's headers without credentials", () => {
  test('Set-Cookie and secret-named headers are left out; the rest are one string each', () => {
    const headers = {
      'content-type': 'text/html',
      'set-cookie': ['sid=s3cret; HttpOnly', 'theme=dark'],
      'x-auth-token': 't0ken',
      'x-api-key': 'k',
      'x-csrf-token': 'c',
      'x-record-source': 'shop',
      vary: ['accept', 'accept-encoding'],
      'www-authenticate': 'Basic realm="shop"',
      'keep-alive': 'timeout=5',
      etag: undefined,
    };
    expect(flatHeaders(headers)).toEqual({
      'content-type': 'text/html',
      'x-record-source': 'shop',
      vary: 'accept, accept-encoding',
      'www-authenticate': 'Basic realm="shop"',
      'keep-alive': 'timeout=5',
    });
    expect(['Set-Cookie', 'set-cookie2', 'authorization', 'Proxy-Authorization', 'x-amz-security-token', 'x-session-id'].filter(isCredentialHeader)).toHaveLength(6);
    expect(['content-type', 'etag', 'x-request-id', 'sec-websocket-accept', 'strict-transport-security'].filter(isCredentialHeader)).toEqual([]);
  });
});

describe('encodeUrlCredentials: a raw password reaches the clients encoded once', () => {
  test.each([
    ['redis://:p@s:s/w@127.0.0.1:6379/0', 'redis://:p%40s%3As%2Fw@127.0.0.1:6379/0', 'p@s:s/w'],
    ['redis://:p%40s%3As%2Fw@127.0.0.1:6379/0', 'redis://:p%40s%3As%2Fw@127.0.0.1:6379/0', 'p@s:s/w'],
    ['mongodb://us@er:pa/ss@h:27017/db', 'mongodb://us%40er:pa%2Fss@h:27017/db', 'pa/ss'],
    ['http://user:100%@proxy:3128', 'http://user:100%25@proxy:3128', '100%'],
    ['redis://127.0.0.1:6379', 'redis://127.0.0.1:6379', ''],
    ['redis://user@host', 'redis://user@host', ''],
  ])('%s', (input, expected, password) => {
    expect(encodeUrlCredentials(input)).toBe(expected);
    // a URL parser then finds the password the user meant
    expect(decodeURIComponent(new URL(expected).password)).toBe(password);
  });

  test('the environment hands clients the encoded URL', () => {
    const env = loadEnv({ REDIS_URL: 'redis://:p@s:s/w@127.0.0.1:6379', MONGO_URL: 'mongodb://u:p@s/s@127.0.0.1:27017/db' });
    expect(new URL(env.redisUrl).password).toBe('p%40s%3As%2Fw');
    expect(env.mongoUrl).toBe('mongodb://u:p%40s%2Fs@127.0.0.1:27017/db');
  });
});

describe('redactDeep', () => {
  test('strings everywhere, shared values are not cycles', () => {
    const shared = { url: 'redis://:p@ss@h' };
    expect(redactDeep({ a: ['http://u:p/w@x'], b: shared, c: shared, n: 1, d: null })).toEqual({
      a: ['http://***:***@x'],
      b: { url: 'redis://***:***@h' },
      c: { url: 'redis://***:***@h' },
      n: 1,
      d: null,
    });
  });

  test('an Error keeps its name, message, code, stack and cause, redacted', () => {
    const cause = new Error('inner redis://:in@ner@h');
    const err = Object.assign(new TypeError('cannot reach redis://:p@ss/w@127.0.0.1:1', { cause }), { code: 'ECONNREFUSED' });
    const out = redactDeep({ err }) as unknown as { err: Record<string, unknown> };
    expect(out.err.name).toBe('TypeError');
    expect(out.err.message).toBe('cannot reach redis://***:***@127.0.0.1:1');
    expect(out.err.code).toBe('ECONNREFUSED');
    expect(out.err.stack).toMatch(/^TypeError: cannot reach redis:\/\/\*\*\*:\*\*\*@127\.0\.0\.1:1\n\s+at /);
    expect(out.err.cause).toMatchObject({ name: 'Error', message: 'inner redis://***:***@h' });
    expect(JSON.stringify(out)).not.toMatch(/p@ss|in@ner/);
  });

  test('cycles become [Circular], in objects, arrays and errors', () => {
    const a: Record<string, unknown> = { url: 'redis://:p@ss@h' };
    a.self = a;
    const list: unknown[] = ['x'];
    list.push(list);
    const err = new Error('e') as Error & { cause?: unknown };
    err.cause = err;
    expect(redactDeep(a)).toEqual({ url: 'redis://***:***@h', self: '[Circular]' });
    expect(redactDeep(list)).toEqual(['x', '[Circular]']);
    expect((redactDeep(err) as unknown as { cause: unknown }).cause).toBe('[Circular]');
  });

  test('dates and buffers pass through', () => {
    const d = new Date(0);
    const b = Buffer.from('x');
    expect(redactDeep({ d, b })).toEqual({ d, b });
  });
});

describe('the logger', () => {
  function capture(): { lines: () => Record<string, unknown>[]; logger: ReturnType<typeof createLogger> } {
    let text = '';
    const sink = new Writable({
      write(chunk, _enc, done) {
        text += chunk.toString();
        done();
      },
    });
    const real = pino.destination;
    // createLogger writes to fd 2; capture it for this test
    (pino as unknown as { destination: unknown }).destination = () => sink;
    try {
      const logger = createLogger({ level: 'info' });
      return {
        logger,
        lines: () =>
          text
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l) as Record<string, unknown>),
      };
    } finally {
      (pino as unknown as { destination: unknown }).destination = real;
    }
  }

  test('errors, bindings and messages are redacted and keep what they say', () => {
    const { logger, lines } = capture();
    const err = Object.assign(new Error('cannot reach redis://:p@ss/w@127.0.0.1:1'), { code: 'ECONNREFUSED' });
    logger.error({ err }, 'connect to redis://:p@ss/w@127.0.0.1:1 failed');
    logger.error(err);
    logger.child({ proxy: 'http://u:p@ss@proxy:3128' }).info('hello');
    const [first, second, third] = lines();
    expect(first).toMatchObject({ msg: 'connect to redis://***:***@127.0.0.1:1 failed', err: { message: 'cannot reach redis://***:***@127.0.0.1:1', code: 'ECONNREFUSED' } });
    expect(String((first!.err as { stack: string }).stack)).toContain('cannot reach redis://***:***@127.0.0.1:1');
    expect(second).toMatchObject({ msg: 'cannot reach redis://***:***@127.0.0.1:1', err: { message: 'cannot reach redis://***:***@127.0.0.1:1', code: 'ECONNREFUSED' } });
    expect(third).toMatchObject({ proxy: 'http://***:***@proxy:3128', msg: 'hello' });
    expect(JSON.stringify(lines())).not.toContain('p@ss');
  });
});

describe('a MongoDB sink is stored without its password', () => {
  const secret = 'mongodb://crawler:p@s:s/w@db.internal:27017/items?authSource=admin';

  test.each([
    [secret, { kind: 'mongo', url: 'mongodb://db.internal:27017/items?authSource=admin', needsCredentials: true }],
    ['mongodb://crawler:p%40ss@db.internal/items', { kind: 'mongo', url: 'mongodb://db.internal/items', needsCredentials: true }],
    ['mongodb://db.internal/items', { kind: 'mongo', url: 'mongodb://db.internal/items' }],
  ])('mongoSinkSpec(%s)', (url, expected) => {
    expect(mongoSinkSpec(url)).toEqual(expected);
    expect(storableSinkSpec({ kind: 'mongo', url })).toEqual(expected);
  });

  test('other sinks are stored as they are', () => {
    expect(storableSinkSpec({ kind: 'mongo' })).toEqual({ kind: 'mongo' });
    expect(storableSinkSpec({ kind: 'jsonl', path: '/x/@y.jsonl' })).toEqual({ kind: 'jsonl', path: '/x/@y.jsonl' });
    expect(stripUrlCredentials('mongodb://h/db')).toEqual({ url: 'mongodb://h/db', hadCredentials: false });
  });

  test('the server key ignores order, case and the default port', () => {
    expect(mongoServerKey('mongodb://u:p@B:27017,a/db')).toBe(mongoServerKey('mongodb://A,b/other'));
    expect(mongoServerKey('mongodb://a:27018/db')).not.toBe(mongoServerKey('mongodb://a/db'));
    expect(mongoServerKey('mongodb+srv://u:p@Cluster0.example.net/db')).toBe('mongodb+srv://cluster0.example.net');
  });

  test.each([
    ["no URL in the sink: the writer's MONGO_URL", { kind: 'mongo' as const }, { mongoUrl: 'mongodb://w:x@local/db' }, 'mongodb://w:x@local/db'],
    [
      'MONGO_URL names the same server: its credentials',
      mongoSinkSpec(secret),
      { mongoUrl: 'mongodb://crawler:p@s:s/w@db.internal/other' },
      'mongodb://crawler:p%40s%3As%2Fw@db.internal:27017/items?authSource=admin',
    ],
    [
      'MONGO_CREDENTIALS names it',
      mongoSinkSpec(secret),
      { mongoUrl: 'mongodb://127.0.0.1/db', mongoCredentials: ['mongodb://x:y@elsewhere/db', 'mongodb://crawler:pw@DB.internal:27017'] },
      'mongodb://crawler:pw@db.internal:27017/items?authSource=admin',
    ],
    ['a sink without credentials opens as it is', mongoSinkSpec('mongodb://open.host/db'), { mongoUrl: 'mongodb://127.0.0.1/db' }, 'mongodb://open.host/db'],
    ['a crawl stored before stripping keeps its URL', { kind: 'mongo' as const, url: 'mongodb://u:p@ss@h/db' }, { mongoUrl: 'mongodb://127.0.0.1/db' }, 'mongodb://u:p%40ss@h/db'],
  ])('%s', (_what, spec, sources, expected) => {
    expect(mongoUrlForSink(spec, sources)).toBe(expected);
  });

  test('a writer without the credentials a sink needs says so, without any password', () => {
    const run = () => mongoUrlForSink(mongoSinkSpec(secret), { mongoUrl: 'mongodb://other:pw2@127.0.0.1/db', mongoCredentials: ['mongodb://x:y@elsewhere/db'] });
    expect(run).toThrow(ConfigError);
    expect(run).toThrow(
      /MongoDB sink mongodb:\/\/db\.internal:27017\/items\?authSource=admin needs a user and password, and this writer has none for mongodb:\/\/db\.internal:27017: give the writer MONGO_URL, or a URL in MONGO_CREDENTIALS/,
    );
    try {
      run();
    } catch (err) {
      expect((err as Error).message).not.toMatch(/p@s|pw2|x:y/);
    }
  });

  test('openSink refuses, before any connection, a sink whose credentials the writer lacks', async () => {
    const spider = validateSpider({ name: 'x', startUrls: ['http://a.com/'] });
    const opening = openSink(storableSinkSpec({ kind: 'mongo', url: secret }), spider, { mongoUrl: 'mongodb://127.0.0.1:1/db', mongoCredentials: [] });
    await expect(opening).rejects.toThrow(ConfigError);
    await expect(opening).rejects.toThrow(/needs a user and password, and this writer has none for mongodb:\/\/db\.internal:27017/);
  });

  test('MONGO_CREDENTIALS is a whitespace-separated list, checked', () => {
    expect(loadEnv({ MONGO_CREDENTIALS: ' mongodb://a:p@ss@h1,h2/db\n mongodb+srv://b:q@c.example.net ' }).mongoCredentials).toEqual([
      'mongodb://a:p%40ss@h1,h2/db',
      'mongodb+srv://b:q@c.example.net',
    ]);
    expect(() => loadEnv({ MONGO_CREDENTIALS: 'http://a:secret@h' })).toThrow(/MONGO_CREDENTIALS: entry 1 must start with mongodb:\/\//);
    expect(() => loadEnv({ MONGO_CREDENTIALS: 'http://a:secret@h' })).not.toThrow(/secret/);
  });
});
