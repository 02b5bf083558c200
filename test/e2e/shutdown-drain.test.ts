// Issue 28, A10: a worker given SIGTERM while Redis is down drained for ever: its in-flight job could
// neither finish nor be handed back. The drain now has a deadline (SHUTDOWN_DRAIN_MS): past it the
// worker exits 1, and the job, left to stall, runs again on another worker once Redis is back.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { startServer } from '../fixtures/http-server.mjs';
import { readJsonl, resultWithin, runCli, spawnCli, tempDir, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';
import { freePort, waitForPort } from '../helpers/ports.js';

/** A private Redis whose every write is on disk before it answers (appendfsync always): a kill -9 loses nothing. */
async function startRedisOn(port: number, dir: string): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'yes', '--appendfsync', 'always', '--maxmemory-policy', 'noeviction'],
    {
      stdio: 'ignore',
    },
  );
  process.once('exit', () => child.kill('SIGKILL'));
  await waitForPort(port, 10_000, 'redis-server');
  return child;
}

const logLines = (stderr: string, msg: string) =>
  stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === msg);

describe('stopping a worker while Redis is down', () => {
  test('SIGTERM with a job in flight and Redis killed: the worker exits 1 at SHUTDOWN_DRAIN_MS; once Redis is back, another worker finishes the job', async () => {
    const port = await freePort();
    const dir = tempDir('shutdown-drain');
    const env = { ...process.env, REDIS_URL: `redis://127.0.0.1:${port}`, QUEUE_PREFIX: uniquePrefix('drain'), LOG_LEVEL: 'info', LOCK_DURATION_MS: '4000', SHUTDOWN_DRAIN_MS: '3000' };
    // The page answers 2 s after it is asked: long enough to kill Redis while its fetch is in flight.
    const site = await startServer(async (req, res) => {
      if (req.url === '/robots.txt') return void res.writeHead(404).end();
      await new Promise((r) => setTimeout(r, 2000));
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html><head><title>slow</title></head><body><h1>slow page</h1></body></html>');
    });
    let redis: ChildProcess | undefined = await startRedisOn(port, dir);
    const workers: ReturnType<typeof spawnCli>[] = [];
    try {
      const out = join(dir, 'items.jsonl');
      const spider = writeJson(dir, 'slow.json', {
        name: 'slow',
        startUrls: [`${site.url}/slow.html`],
        allowPrivateAddresses: true,
        items: [{ type: 'page', fields: { title: { css: 'h1', required: true } } }],
      });
      expect((await runCli(['seed', spider, '--sink', out, '--crawl-id', 'slow'], { env })).code).toBe(0);
      const fetcher = spawnCli(['worker', 'fetcher', '--concurrency', '2'], { env });
      workers.push(fetcher);
      await waitFor(() => site.requests.some((r) => r.path === '/slow.html'), 60_000, 'the fetch of the page to begin');
      redis.kill('SIGKILL');
      await new Promise((resolve) => redis!.once('exit', resolve));
      redis = undefined;
      fetcher.kill('SIGTERM');
      // Without a deadline this never ends: the job waits on Redis for ever, and the drain on the job.
      const stopped = await resultWithin(fetcher, 60_000, 'the fetcher stopping while Redis is down');
      expect({
        code: stopped.code,
        deadline: logLines(stopped.stderr, 'drain deadline passed (SHUTDOWN_DRAIN_MS): exiting with jobs still in flight; they run again elsewhere once their lock lapses').length,
      }).toEqual({
        code: 1,
        deadline: 1,
      });

      // Redis comes back from its AOF; the job the fetcher held stalls and runs again on a new fleet.
      redis = await startRedisOn(port, dir);
      for (const stage of ['fetcher', 'parser', 'writer']) workers.push(spawnCli(['worker', stage, '--concurrency', '2'], { env }));
      expect((await runCli(['wait', '--crawl-id', 'slow', '--timeout', '90'], { env, timeoutMs: 100_000 })).code).toBe(0);
      expect(readJsonl(out).map((i) => i.title)).toEqual(['slow page']);
      const status = JSON.parse((await runCli(['status', '--crawl-id', 'slow', '--json'], { env })).stdout);
      expect(status.counters).toMatchObject({ fetched: 1, parsed: 1, items: 1, written: 1, failed: 0 });
    } finally {
      for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
      redis?.kill('SIGKILL');
      await site.close();
    }
  });
});
