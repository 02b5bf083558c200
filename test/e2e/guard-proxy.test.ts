import http from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import { addressPolicy, type Lookup } from '@crawlfleet/fetch';
import { GuardProxy } from '@crawlfleet/render';
import { Redis } from 'ioredis';
import { REDIS_URL, deadLetters, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';

/** The guard's policy in these tests: the loopback test servers on 127.0.0.1, nothing else private. */
const POLICY = addressPolicy({ allowPrivateAddresses: false, allowedAddresses: ['127.0.0.1'] });
const PAGE = (title: string) => `<html><head><title>${title}</title></head><body><h1>${title}</h1><p>${'A page of some length. '.repeat(40)}</p></body></html>`;

/**
 * A site that answers raw bytes, by request path, whatever HTTP allows: it records each request's
 * path, and each connection it accepted, open or closed. `hang` accepts and never answers.
 */
async function rawSite(answers: Record<string, string | 'hang'>) {
  const requests: string[] = [];
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  const server = net.createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let head = '';
    socket.on('data', (chunk) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      const path = head.split(' ')[1] ?? '';
      head = '';
      requests.push(path);
      const answer = answers[path] ?? `HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n`;
      if (answer !== 'hang') socket.end(Buffer.from(answer, 'latin1'));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    requests,
    accepted: () => accepted,
    open: () => sockets.size,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const html = (status: string, body: string) => `HTTP/1.1 ${status}\r\ncontent-type: text/html\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

/** A GET through the proxy, as a browser sends it: the absolute URL as the request target. */
function getThrough(proxy: GuardProxy, url: string): Promise<{ status: number; message: string; body: string }> {
  const { port } = new URL(proxy.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: url, agent: false }, (res) => {
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, message: res.statusMessage ?? '', body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A raw connection to the proxy that sends `head` and collects what comes back until it closes. */
function rawToProxy(proxy: GuardProxy, head: string): { socket: net.Socket; received: () => string; closed: Promise<void> } {
  const { port } = new URL(proxy.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  let received = '';
  socket.on('data', (c) => (received += c.toString('latin1')));
  socket.on('error', () => undefined);
  socket.write(head);
  return { socket, received: () => received, closed: new Promise((resolve) => socket.on('close', () => resolve())) };
}

/** A resolver the test holds: each lookup waits until the test releases it, then answers 127.0.0.1. */
function heldResolver() {
  const waiting: (() => void)[] = [];
  const resolve: Lookup = (_hostname, options, callback) => {
    waiting.push(() => ((options as { all?: boolean }).all ? callback(null, [{ address: '127.0.0.1', family: 4 }]) : callback(null, '127.0.0.1', 4)));
  };
  return {
    resolve,
    waiting: () => waiting.length,
    releaseAll: () => {
      for (const answer of waiting.splice(0)) answer();
    },
  };
}

describe('the guard proxy survives what a site answers (issue 28, item 12)', () => {
  test('statuses outside 100-599, a 101 to a plain request and unparseable heads become a 502; a bad reason phrase is dropped and the page kept; the proxy serves on', async () => {
    const page = PAGE('fine');
    const site = await rawSite({
      '/s099': html('099 X', page),
      '/s000': html('000 X', page),
      '/s600': html('600 X', page),
      '/s999': html('999 X', page),
      '/s101': 'HTTP/1.1 101 Switching Protocols\r\nupgrade: foo\r\nconnection: upgrade\r\n\r\n',
      '/reason-del': html('200 O\x7fK', page),
      '/reason-ctl': html('200 O\x01K', page),
      '/header-del': `HTTP/1.1 200 OK\r\nx-a: b\x7fc\r\ncontent-length: 2\r\n\r\nhi`,
      '/two-lengths': `HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nhi`,
      '/http09': 'hi there\r\n',
      '/ok': html('200 OK', page),
    });
    const proxy = await GuardProxy.start(POLICY, new Map());
    try {
      const answers: Record<string, { status: number; body: string }> = {};
      for (const path of ['/s099', '/s000', '/s600', '/s999', '/s101', '/reason-del', '/reason-ctl', '/header-del', '/two-lengths', '/http09', '/ok']) {
        const { status, body } = await getThrough(proxy, `${site.url}${path}`);
        answers[path] = { status, body: status === 200 ? body : '' };
      }
      expect(answers).toEqual({
        '/s099': { status: 502, body: '' },
        '/s000': { status: 502, body: '' },
        '/s600': { status: 502, body: '' },
        '/s999': { status: 502, body: '' },
        '/s101': { status: 502, body: '' },
        '/reason-del': { status: 200, body: page },
        '/reason-ctl': { status: 200, body: page },
        '/header-del': { status: 502, body: '' },
        '/two-lengths': { status: 502, body: '' },
        '/http09': { status: 502, body: '' },
        '/ok': { status: 200, body: page },
      });
    } finally {
      await proxy.close();
      await site.close();
    }
  });

  test('a rendered crawl of such a site: the renderer lives, each bad page is dead-lettered with a code, the good ones give their items', async () => {
    const site = await rawSite({
      '/s099': html('099 X', PAGE('s099')),
      '/s000': html('000 X', PAGE('s000')),
      '/reason-del': html('200 O\x7fK', PAGE('reason-del')),
      '/ok': html('200 OK', PAGE('ok')),
    });
    const prefix = uniquePrefix('guard-crawl');
    const dir = tempDir('guard-crawl');
    try {
      const spider = writeJson(dir, 'raw.json', {
        name: 'raw',
        startUrls: ['/s099', '/s000', '/reason-del', '/ok'].map((p) => `${site.url}${p}`),
        allowedAddresses: ['127.0.0.1'],
        obeyRobotsTxt: false,
        render: 'always',
        retry: { attempts: 1 },
        items: [{ type: 'page', fields: { title: { css: 'title', required: true } } }],
      });
      const out = join(dir, 'items.jsonl');
      const run = await runCli(['crawl', spider, '--out', out, '--json', '--quiet'], { env: testEnv(prefix) });
      expect({ code: run.code, tail: run.code === 0 ? '' : run.stderr.slice(-2000) }).toEqual({ code: 0, tail: '' });
      expect(JSON.parse(run.stdout.trim().split('\n').pop()!).counters).toMatchObject({ rendered: 4, items: 2, written: 2, failed: 2 });
      expect(
        readJsonl(out)
          .map((i) => i.title)
          .sort(),
      ).toEqual(['ok', 'reason-del']);
      const redis = new Redis(REDIS_URL);
      const crawlId = JSON.parse(run.stdout.trim().split('\n').pop()!).crawlId as string;
      const deadLettered = (await deadLetters(redis, prefix, crawlId).finally(() => redis.disconnect()))
        .map(({ url, code, reason }) => ({ url: new URL(url).pathname, code, reason }))
        .sort((a, b) => a.url.localeCompare(b.url));
      expect(deadLettered).toEqual([
        { url: '/s000', code: 'ERR_HTTP_STATUS', reason: 'HTTP 502' },
        { url: '/s099', code: 'ERR_HTTP_STATUS', reason: 'HTTP 502' },
      ]);
    } finally {
      await site.close();
      await dropPrefix(prefix);
    }
  });
});

describe('the guard proxy leaves no upstream connection behind (issue 28, item 15)', () => {
  // The browser asks, and leaves while the name is still resolving: a GET, then a CONNECT. A request
  // after it goes through, and its connection is the only one the site ever accepts.
  test.each([
    ['GET', (port: number) => `GET http://site.test:${port}/dropped HTTP/1.1\r\nhost: site.test:${port}\r\n\r\n`],
    ['CONNECT', (port: number) => `CONNECT site.test:${port} HTTP/1.1\r\nhost: site.test:${port}\r\n\r\n`],
  ])('a browser that drops its %s while the name resolves: no upstream request or tunnel is ever opened for it', async (_method, request) => {
    const site = await rawSite({ '/dropped': html('200 OK', PAGE('dropped')), '/after': html('200 OK', PAGE('after')) });
    const held = heldResolver();
    const proxy = await GuardProxy.start(POLICY, new Map(), () => undefined, { resolve: held.resolve });
    try {
      const dropped = rawToProxy(proxy, request(site.port));
      await waitFor(() => held.waiting() === 1, 30_000, 'the lookup to start');
      dropped.socket.destroy();
      await dropped.closed;
      await waitFor(async () => (await proxy.clientConnections()) === 0, 30_000, 'the proxy to see the client gone');
      held.releaseAll();
      const after = getThrough(proxy, `http://site.test:${site.port}/after`);
      await waitFor(() => held.waiting() === 1, 30_000, 'the next lookup');
      held.releaseAll();
      expect((await after).status).toBe(200);
      expect({ requests: site.requests, accepted: site.accepted() }).toEqual({ requests: ['/after'], accepted: 1 });
    } finally {
      await proxy.close();
      await site.close();
    }
  });

  test('timeouts: a site that never answers gets a 504 and its connection closed; an idle tunnel is closed on both sides', async () => {
    const site = await rawSite({ '/hang': 'hang' });
    const proxy = await GuardProxy.start(POLICY, new Map(), () => undefined, { timeoutMs: 500 });
    try {
      const answer = await getThrough(proxy, `${site.url}/hang`);
      expect(answer.status).toBe(504);
      await waitFor(() => site.open() === 0, 30_000, 'the upstream connection of the hung request to close');
      // A tunnel through which nothing passes: closed by the proxy, the site's side too.
      const tunnel = rawToProxy(proxy, `CONNECT 127.0.0.1:${site.port} HTTP/1.1\r\nhost: 127.0.0.1:${site.port}\r\n\r\n`);
      await waitFor(() => tunnel.received().startsWith('HTTP/1.1 200'), 30_000, 'the tunnel to open');
      await waitFor(() => site.accepted() === 2, 30_000, 'the site to accept the tunnel');
      await Promise.race([tunnel.closed, new Promise((_, reject) => setTimeout(() => reject(new Error('the idle tunnel was never closed')), 30_000))]);
      await waitFor(() => site.open() === 0, 30_000, "the tunnel's upstream connection to close");
    } finally {
      await proxy.close();
      await site.close();
    }
  });

  test('a page that asks for 1,500 forbidden addresses: the guard remembers at most 1,000 targets, logs 20 lines, and summarises the rest', async () => {
    const lines: string[] = [];
    const summaries: { refused: number; unlogged: number }[] = [];
    const proxy = await GuardProxy.start(POLICY, new Map(), (target) => lines.push(target), { onRefusalSummary: (s) => summaries.push(s) });
    try {
      for (let batch = 0; batch < 15; batch++) {
        await Promise.all(
          Array.from({ length: 100 }, async (_, i) => {
            const connect = rawToProxy(proxy, `CONNECT 169.254.169.254:${1000 + batch * 100 + i} HTTP/1.1\r\n\r\n`);
            await connect.closed;
            expect(connect.received()).toMatch(/^HTTP\/1\.1 403 /);
          }),
        );
      }
      expect(lines).toHaveLength(20);
      expect(proxy.refusals).toEqual({ total: 1500, targetsKept: 1000 });
      // The window's summary comes when it ends (a minute), or when the proxy closes.
      await proxy.close();
      expect(summaries).toEqual([{ refused: 1500, unlogged: 1480, windowMs: 60_000 }]);
    } finally {
      await proxy.close();
    }
  });
});
