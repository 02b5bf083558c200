import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, closeSync, openSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { mongoAnswers } from '../chaos/processes.mjs';
import { tempDir } from './cli.js';
import { freePort, waitForPort } from './ports.js';

export interface MongoServer {
  /** a fresh database on the server, for one test file */
  url: string;
  /** stops the server (FerretDB only) */
  stop(): Promise<void>;
  /** starts it again on the same port and data (FerretDB only) */
  start(): Promise<void>;
  controllable: boolean;
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
  const spawnServer = async () => {
    const log = openSync(join(dir, 'ferretdb.log'), 'a');
    child = spawn(bin, ['--handler=sqlite', `--sqlite-url=file:${dir}/`, `--listen-addr=127.0.0.1:${port}`, '--telemetry=disable', '--debug-addr=-', '--log-level=warn'], {
      stdio: ['ignore', log, log],
    });
    closeSync(log);
    await waitForPort(port, 20_000, 'FerretDB');
  };
  // Started is not the same as serving: the outage test once saw a restarted FerretDB close every
  // connection for two minutes. A server that cannot answer a ping within 15 s is killed and
  // started again (its log, ferretdb.log in the data directory, says so), so an outage ends when
  // the test says.
  const start = async () => {
    for (let attempt = 1; ; attempt++) {
      await spawnServer();
      if (await mongoAnswers(`mongodb://127.0.0.1:${port}/`, 15_000)) return;
      appendFileSync(join(dir, 'ferretdb.log'), `--- no answer to ping; restarting it (attempt ${attempt}) ---\n`);
      const exited = new Promise((r) => child!.once('exit', r));
      child!.kill('SIGKILL');
      await exited;
      if (attempt === 3) throw new Error(`FerretDB on port ${port} does not answer; see ${join(dir, 'ferretdb.log')}`);
    }
  };
  const stop = async () => {
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGTERM');
    // A server that does not stop within 5 s is killed: the outage must begin when the test says.
    const escalate = setTimeout(() => child!.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(escalate);
    appendFileSync(join(dir, 'ferretdb.log'), `--- stopped by the test (${child.signalCode ?? child.exitCode}) ---\n`);
  };
  await start();
  return { url: `mongodb://127.0.0.1:${port}/${dbName}`, stop, start, controllable: true };
}
