// The chaos suite's processes: every child it starts is registered here, so that one call ends them
// all (on success, on failure, on Ctrl-C), and none outlives the run. Servers listen on loopback only.
import { spawn } from 'node:child_process';
import { closeSync, createWriteStream, mkdirSync, openSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';

/** @type {Set<import('node:child_process').ChildProcess>} */
const children = new Set();

/** Registers a child started elsewhere, so that killAllChildren ends it too. */
export function track(child) {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/**
 * Starts a child with its stdout and stderr appended to `logFile`; registered until it exits.
 * With `onOutput`, the output also passes through the harness (to see a worker become ready).
 */
export function spawnLogged(command, args, { env = process.env, cwd, logFile, onOutput }) {
  let child;
  if (onOutput) {
    child = spawn(command, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const log = createWriteStream(logFile, { flags: 'a' });
    let open = 2;
    for (const stream of [child.stdout, child.stderr]) {
      stream.on('data', (d) => onOutput(String(d)));
      stream.pipe(log, { end: false });
      stream.once('end', () => --open === 0 && log.end());
    }
  } else {
    const log = openSync(logFile, 'a');
    child = spawn(command, args, { env, cwd, stdio: ['ignore', log, log] });
    closeSync(log);
  }
  children.add(child);
  child.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  child.exited.then(() => children.delete(child));
  return child;
}

/** SIGKILL, then waits for the exit. */
export async function kill9(child) {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  return child.exited;
}

/** SIGTERM, and SIGKILL after `graceMs` if it is still there. */
export async function stopGently(child, graceMs = 10_000) {
  if (child.exitCode !== null || child.signalCode !== null) return child.exited;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  const result = await child.exited;
  clearTimeout(timer);
  return result;
}

/** Ends every child still running (SIGKILL) and waits for them. */
export async function killAllChildren() {
  await Promise.all([...children].map((c) => kill9(c)));
}

let cleanupInstalled = false;
/** Whatever ends the harness, its children end with it. `onSignal` may close servers first. */
export function installCleanup(onSignal = async () => undefined) {
  if (cleanupInstalled) return;
  cleanupInstalled = true;
  const byebye = (code) => async () => {
    await onSignal().catch(() => undefined);
    await killAllChildren();
    process.exit(code);
  };
  process.once('SIGINT', byebye(130));
  process.once('SIGTERM', byebye(143));
  process.once('uncaughtException', (err) => {
    process.stderr.write(`chaos: ${err?.stack ?? err}\n`);
    byebye(1)();
  });
  // The last resort, synchronous: a plain exit still sends every child its SIGKILL.
  process.once('exit', () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  });
}

export async function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export async function waitForPort(port, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      }).on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${what} did not listen on 127.0.0.1:${port} within ${timeoutMs} ms`);
    await sleep(50);
  }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * A private Redis for one run: loopback, AOF every second, noeviction, its own directory. `kill9()`
 * is the crash; `start()` again replays the AOF, as a restarted production Redis would.
 */
export async function startRedis(dir) {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'everysec', '--save', '', '--maxmemory-policy', 'noeviction', '--daemonize', 'no'];
  let child;
  const redis = {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    async start() {
      child = spawnLogged('redis-server', args, { logFile: join(dir, 'redis.log') });
      await waitForPort(port, 30_000, 'redis-server');
    },
    async kill9() {
      await kill9(child);
    },
    async stop() {
      if (child) await stopGently(child, 5000);
    },
  };
  await redis.start();
  return redis;
}

/**
 * FerretDB (a MongoDB wire-protocol server on SQLite) on a loopback port: `stop()` and `start()`
 * again on the same port and data make a MongoDB outage.
 */
export async function startFerretDb(bin, dir, pingUntilUp) {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  let child;
  const mongo = {
    url: `mongodb://127.0.0.1:${port}/`,
    port,
    async start() {
      // A restarted FerretDB has once been seen to close every connection for minutes; one that
      // does not answer a ping within 15 s is started again (its log says so).
      for (let attempt = 1; ; attempt++) {
        child = spawnLogged(bin, ['--handler=sqlite', `--sqlite-url=file:${dir}/`, `--listen-addr=127.0.0.1:${port}`, '--telemetry=disable', '--debug-addr=-', '--log-level=warn'], {
          logFile: join(dir, 'ferretdb.log'),
        });
        await waitForPort(port, 30_000, 'FerretDB');
        if (await pingUntilUp(mongo.url, 15_000)) return;
        await kill9(child);
        if (attempt === 3) throw new Error(`FerretDB on port ${port} does not answer pings; see ${join(dir, 'ferretdb.log')}`);
      }
    },
    async stop() {
      // An outage begins when the harness says: a server that takes more than 5 s to stop is killed.
      if (child) await stopGently(child, 5000);
    },
  };
  await mongo.start();
  return mongo;
}

/** Whether a MongoDB (FerretDB) at `url` answers a ping within `timeoutMs`, asking every 250 ms. */
export async function mongoAnswers(url, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const client = new MongoClient(url, { serverSelectionTimeoutMS: 2000, connectTimeoutMS: 2000 });
    try {
      await client.db('admin').command({ ping: 1 });
      return true;
    } catch {
      await sleep(250);
    } finally {
      await client.close().catch(() => undefined);
    }
  }
  return false;
}
