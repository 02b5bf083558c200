import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, connect } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { tempDir } from './cli.js';

export interface MongoServer {
  /** a fresh database on the server, for one test file */
  url: string;
  /** stops the server (FerretDB only) */
  stop(): Promise<void>;
  /** starts it again on the same port and data (FerretDB only) */
  start(): Promise<void>;
  controllable: boolean;
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      }).on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`FerretDB did not listen on ${port}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** MONGO_URL when it is set (for example a real MongoDB); otherwise a FerretDB of our own on loopback. */
export async function startMongo(dbName: string): Promise<MongoServer> {
  if (process.env.MONGO_URL) {
    const url = new URL(process.env.MONGO_URL);
    url.pathname = `/${dbName}`;
    return { url: url.href, stop: async () => undefined, start: async () => undefined, controllable: false };
  }
  const bin = process.env.FERRETDB_BIN ?? join(homedir(), '.cache', 'crawlfleet', 'ferretdb-v1.24.2', 'ferretdb');
  const dir = tempDir('ferretdb');
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(bin, ['--handler=sqlite', `--sqlite-url=file:${dir}/`, `--listen-addr=127.0.0.1:${port}`, '--telemetry=disable', '--debug-addr=-', '--log-level=error'], { stdio: 'ignore' });
    await waitForPort(port, 20_000);
  };
  const stop = async () => {
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGTERM');
    // A server that does not stop within 5 s is killed: the outage must begin when the test says.
    const escalate = setTimeout(() => child!.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(escalate);
  };
  await start();
  return { url: `mongodb://127.0.0.1:${port}/${dbName}`, stop, start, controllable: true };
}
