import { request } from 'node:http';
import { Redis } from 'ioredis';
import { Keys, createQueues, closeQueues, type Queues } from '@crawlfleet/core';
import { REDIS_URL, dropPrefix, resultWithin, spawnCli, testEnv, uniquePrefix } from '../helpers/cli.js';
import { freePort, waitForPort } from '../helpers/ports.js';

const USER = 'ops';
const PASSWORD = 'dashboard-pw-19';
const AUTH = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;

/** One request to the dashboard on loopback, with whatever Host and Origin a browser might send. */
function send(port: number, method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        setHost: false,
        headers: { ...headers, ...(payload ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) } : {}) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** Bull Board's API calls that change a queue: add, pause, empty, clean, obliterate. */
const WRITES: { method: string; path: string; body?: unknown }[] = [
  { method: 'POST', path: '/api/queues/fetch/add', body: { name: 'planted', data: { url: 'http://169.254.169.254/' } } },
  { method: 'PUT', path: '/api/queues/fetch/pause' },
  { method: 'PUT', path: '/api/queues/fetch/empty' },
  { method: 'PUT', path: '/api/queues/fetch/clean/waiting' },
  { method: 'PUT', path: '/api/queues/fetch/obliterate' },
];
const READS = ['/', '/api/queues', '/api/crawls', '/metrics'];

describe('dashboard: a page that rebinds its name to 127.0.0.1, or posts from another site, changes nothing', () => {
  const prefix = uniquePrefix('dash-sec');
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  let queues: Queues;
  /** what the fetch queue holds: jobs by state, and whether it is paused */
  const snapshot = async () => ({ counts: await queues.fetch.getJobCounts('waiting', 'active', 'delayed', 'failed'), paused: await queues.fetch.isPaused() });

  beforeAll(async () => {
    queues = createQueues(redis, new Keys(prefix));
    for (let i = 1; i <= 3; i++) await queues.fetch.add('held', { url: `http://example.com/${i}` }, { jobId: `held-${i}` });
  });
  afterAll(async () => {
    await closeQueues(queues);
    redis.disconnect();
    await dropPrefix(prefix);
  });

  /** Runs the dashboard with `extra` in its environment while `body` runs; it stops by itself. */
  async function withDashboard(extra: Record<string, string>, body: (port: number) => Promise<void>): Promise<void> {
    const port = await freePort();
    const dashboard = spawnCli(['dashboard', '--port', String(port)], { env: testEnv(prefix, extra) });
    try {
      await waitForPort(port, 30_000, 'dashboard');
      await body(port);
    } finally {
      dashboard.kill('SIGTERM');
      await resultWithin(dashboard, 30_000, 'dashboard');
    }
  }

  test('without credentials: a foreign Host gets 403 for every read and write, a foreign Origin for every write; the queue keeps its 3 jobs; loopback names still work', async () => {
    const before = await snapshot();
    expect(before).toEqual({ counts: { waiting: 3, active: 0, delayed: 0, failed: 0 }, paused: false });
    await withDashboard({}, async (port) => {
      const evilHost = { host: `evil.example:${port}`, origin: `http://evil.example:${port}` };
      const foreignOrigin = { host: `127.0.0.1:${port}`, origin: 'http://evil.example' };
      const nullOrigin = { host: `127.0.0.1:${port}`, origin: 'null' };
      const answers: Record<string, number> = {};
      for (const w of WRITES) {
        answers[`rebound ${w.method} ${w.path}`] = (await send(port, w.method, w.path, evilHost, w.body)).status;
        answers[`cross-site ${w.method} ${w.path}`] = (await send(port, w.method, w.path, foreignOrigin, w.body)).status;
        answers[`opaque origin ${w.method} ${w.path}`] = (await send(port, w.method, w.path, nullOrigin, w.body)).status;
      }
      for (const path of READS) answers[`rebound GET ${path}`] = (await send(port, 'GET', path, { host: `evil.example:${port}` })).status;
      // Everything at once, so a failure shows every answer and what became of the queue.
      expect({ answers, queue: await snapshot() }).toEqual({ answers: Object.fromEntries(Object.keys(answers).map((k) => [k, 403])), queue: before });

      // The refusal says why, and what to set.
      const refused = await send(port, 'GET', '/api/queues', { host: `evil.example:${port}` });
      expect(refused.text).toContain('evil.example');
      expect(refused.text).toContain('DASHBOARD_ALLOWED_HOSTS');
      expect((await send(port, 'PUT', '/api/queues/fetch/pause', foreignOrigin)).text).toContain('http://evil.example');
      // Probes tell nothing of the crawls: they answer any Host.
      expect((await send(port, 'GET', '/healthz', { host: `evil.example:${port}` })).status).toBe(200);

      // Loopback names, the bind address and a client that sends no Origin (curl) still work.
      for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `dash.localhost:${port}`]) {
        expect({ host, status: (await send(port, 'GET', '/api/queues', { host })).status }).toEqual({ host, status: 200 });
      }
      const added = await send(port, 'POST', '/api/queues/fetch/add', { host: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${port}` }, { name: 'by-hand', data: {} });
      expect(added.status).toBe(200);
      expect((await send(port, 'PUT', '/api/queues/fetch/pause', { host: `localhost:${port}` })).status).toBe(200);
      expect(await snapshot()).toEqual({ counts: { waiting: 4, active: 0, delayed: 0, failed: 0 }, paused: true });
      expect((await send(port, 'PUT', '/api/queues/fetch/resume', { host: `localhost:${port}`, origin: `http://localhost:${port}` })).status).toBe(200);
    });
  });

  test('DASHBOARD_ALLOWED_HOSTS adds names (a tunnel or reverse proxy); with credentials any Host may ask, but a write from another origin is still refused', async () => {
    await withDashboard({ DASHBOARD_ALLOWED_HOSTS: 'dash.example, .corp.example' }, async (port) => {
      expect((await send(port, 'GET', '/api/queues', { host: `dash.example:${port}` })).status).toBe(200);
      expect((await send(port, 'GET', '/api/queues', { host: `ops.corp.example:${port}` })).status).toBe(200);
      expect((await send(port, 'GET', '/api/queues', { host: `evil.example:${port}` })).status).toBe(403);
      // a reverse proxy that rewrites Host: the page's origin is a listed name
      expect((await send(port, 'PUT', '/api/queues/fetch/pause', { host: `127.0.0.1:${port}`, origin: 'https://dash.example' })).status).toBe(200);
      expect((await send(port, 'PUT', '/api/queues/fetch/resume', { host: `dash.example:${port}`, origin: `http://dash.example:${port}` })).status).toBe(200);
    });
    const before = await snapshot();
    await withDashboard({ DASHBOARD_USER: USER, DASHBOARD_PASSWORD: PASSWORD }, async (port) => {
      // a rebound name cannot send the credentials it never had
      expect((await send(port, 'GET', '/api/queues', { host: `evil.example:${port}` })).status).toBe(401);
      expect((await send(port, 'GET', '/api/queues', { host: `dash.internal:${port}`, authorization: AUTH })).status).toBe(200);
      // a browser that holds the credentials, on a page of another site
      const statuses = [];
      for (const w of WRITES) statuses.push((await send(port, w.method, w.path, { host: `127.0.0.1:${port}`, origin: 'http://evil.example', authorization: AUTH }, w.body)).status);
      expect({ statuses, queue: await snapshot() }).toEqual({ statuses: WRITES.map(() => 403), queue: before });
      expect((await send(port, 'PUT', '/api/queues/fetch/pause', { host: `dash.internal:${port}`, origin: `http://dash.internal:${port}`, authorization: AUTH })).status).toBe(200);
      expect(await queues.fetch.isPaused()).toBe(true);
    });
  });
});
