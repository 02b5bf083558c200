import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { ROOT, spawnCli, tempDir, testEnv, uniquePrefix, waitFor } from '../helpers/cli.js';
import { freePort, waitForPort } from '../helpers/ports.js';

/** A Redis of the test's own, so it can be stopped and started again on the same port. */
function startRedis(port: number, dir: string): ChildProcess {
  return spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction'], { stdio: 'ignore' });
}

/**
 * GET with a deadline: undefined when no answer came in time (a blocked event loop answers nothing).
 * 4 s by default: with Redis gone, /readyz answers when its check's own 2 s timeout ends.
 */
async function probe(url: string, timeoutMs = 4000): Promise<{ status: number; body: Record<string, unknown> } | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  } catch {
    return undefined;
  }
}

describe('worker health: readiness follows Redis, liveness follows the event loop', () => {
  test('readiness turns red within 5 s of Redis stopping and green after it is back; liveness turns red while the loop is blocked', async () => {
    const dir = tempDir('health');
    const redisPort = await freePort();
    const metricsPort = await freePort();
    let redis = startRedis(redisPort, dir);
    await waitForPort(redisPort, 10_000, 'redis');
    const env = {
      ...testEnv(uniquePrefix('health'), { REDIS_URL: `redis://127.0.0.1:${redisPort}`, METRICS_PORT: String(metricsPort), METRICS_HOST: '127.0.0.1' }),
      NODE_OPTIONS: `--require ${join(ROOT, 'test', 'fixtures', 'block-loop.cjs')}`,
    };
    const worker = spawnCli(['worker', 'parser'], { env });
    const ready = `http://127.0.0.1:${metricsPort}/readyz`;
    const live = `http://127.0.0.1:${metricsPort}/healthz`;
    try {
      await waitForPort(metricsPort, 20_000, 'the worker metrics port');
      await waitFor(async () => (await probe(ready))?.status === 200, 10_000, 'readiness');

      redis.kill('SIGTERM');
      await new Promise((r) => redis.once('exit', r));
      const stoppedAt = Date.now();
      await waitFor(async () => (await probe(ready))?.status === 503, 5_000, 'readiness to turn red');
      const redAfterMs = Date.now() - stoppedAt;
      const red = await probe(ready);
      expect(red?.body).toMatchObject({ ready: false, checks: [{ name: 'redis', ok: false }] });
      // Liveness is about the process, not its dependencies.
      expect((await probe(live))?.status).toBe(200);

      redis = startRedis(redisPort, dir);
      const restartedAt = Date.now();
      await waitFor(async () => (await probe(ready))?.status === 200, 30_000, 'readiness to turn green again');
      process.stderr.write(`health: readiness red ${redAfterMs} ms after Redis stopped, green ${Date.now() - restartedAt} ms after it restarted\n`);

      expect((await probe(live))?.status).toBe(200);
      worker.kill('SIGUSR2'); // the fixture blocks the event loop for 6 s
      await new Promise((r) => setTimeout(r, 500));
      expect(await probe(live, 2000)).toBeUndefined();
      // Back from the stall, the probe still reports it for a while, then the process is healthy again.
      await waitFor(async () => (await probe(live))?.status === 503, 10_000, 'liveness to report the stall');
      expect(((await probe(live))?.body.eventLoopStalledMs as number) ?? 0).toBeGreaterThanOrEqual(5000);
      await waitFor(async () => (await probe(live))?.status === 200, 20_000, 'liveness to turn green again');
    } finally {
      worker.kill('SIGTERM');
      await worker.result;
      redis.kill('SIGTERM');
    }
  });
});
