import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from './cli.js';
import { freePort, waitForPort } from './ports.js';

/** A real forward proxy (Debian's tinyproxy) on a loopback port, with its log. */
export interface Tinyproxy {
  /** the proxy URL, with credentials when it has them */
  url: string;
  port: number;
  logFile: string;
  /** kills it (SIGKILL: a proxy that dies, not one that says goodbye) */
  kill(): Promise<void>;
  /** starts it again on the same port */
  start(): Promise<void>;
  /** every CONNECT it received, from its log: when and to where */
  connects(): { at: number; target: string }[];
  /** every request it received, CONNECT or any other method, from its log: the method and its target */
  requests(): { method: string; target: string }[];
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** tinyproxy logs local time to the millisecond without a year: "CONNECT   Dec 02 20:17:50.055 [6108]: Request ...". */
function logTime(month: string, day: string, time: string): number {
  const [h, m, s] = time.split(':');
  const d = new Date();
  d.setMonth(MONTHS.indexOf(month), Number(day));
  d.setHours(Number(h), Number(m), Math.floor(Number(s)), Math.round((Number(s) % 1) * 1000));
  return d.getTime();
}

/**
 * @param options.auth  BasicAuth user and password
 * @param options.bind  the source address of its outgoing connections (127.0.0.x), so a test site
 *                      can tell which proxy a request came through
 * @param options.onlyHosts  the hosts it may connect to (exact names or addresses); it refuses any
 *                      other with a 403 before connecting (tinyproxy's Filter, default deny)
 */
export async function startTinyproxy(options: { auth?: { user: string; password: string }; bind?: string; onlyHosts?: string[] } = {}): Promise<Tinyproxy> {
  const dir = tempDir('tinyproxy');
  const port = await freePort();
  const logFile = join(dir, 'tinyproxy.log');
  const config = join(dir, 'tinyproxy.conf');
  const filter = join(dir, 'filter');
  if (options.onlyHosts) writeFileSync(filter, options.onlyHosts.map((h) => `^${h.replace(/[.[\]]/g, '\\$&')}$\n`).join(''));
  writeFileSync(
    config,
    [
      `Port ${port}`,
      'Listen 127.0.0.1',
      'Timeout 30',
      `LogFile "${logFile}"`,
      'LogLevel Connect',
      'MaxClients 200',
      'DisableViaHeader Yes',
      ...(options.auth ? [`BasicAuth ${options.auth.user} ${options.auth.password}`] : []),
      ...(options.bind ? [`Bind ${options.bind}`] : []),
      ...(options.onlyHosts ? [`Filter "${filter}"`, 'FilterType ere', 'FilterDefaultDeny Yes'] : []),
      '',
    ].join('\n'),
  );
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(process.env.TINYPROXY_BIN ?? 'tinyproxy', ['-d', '-c', config], { stdio: 'ignore' });
    child.unref();
    await waitForPort(port, 10_000, 'tinyproxy');
  };
  const kill = async () => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  };
  await start();
  process.once('exit', () => child?.kill('SIGKILL'));
  const credentials = options.auth ? `${options.auth.user}:${options.auth.password}@` : '';
  return {
    url: `http://${credentials}127.0.0.1:${port}`,
    port,
    logFile,
    kill,
    start,
    connects() {
      const text = readLog(logFile);
      return [...text.matchAll(/^CONNECT\s+(\w{3}) (\d\d) (\d\d:\d\d:\d\d\.\d{3}) \[\d+\]: Request \(file descriptor \d+\): CONNECT (\S+) HTTP/gm)].map((m) => ({
        at: logTime(m[1]!, m[2]!, m[3]!),
        target: m[4]!,
      }));
    },
    requests() {
      return [...readLog(logFile).matchAll(/\]: Request \(file descriptor \d+\): (\S+) (\S+) HTTP/g)].map((m) => ({ method: m[1]!, target: m[2]! }));
    },
  };
}

function readLog(logFile: string): string {
  try {
    return readFileSync(logFile, 'utf8');
  } catch {
    return '';
  }
}
