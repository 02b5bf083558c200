// The fleet as separate OS processes, kept at N of each role like a supervisor would: a process the
// harness kills is restarted at once; one that exits by itself is counted (with its exit code) and
// restarted a second later.
import { appendFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { kill9, spawnLogged, stopGently, track } from './processes.mjs';

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const MAIN = join(ROOT, 'services', 'cli', 'dist', 'main.js');
export const ROLES = ['fetcher', 'parser', 'writer'];

/** Runs one CLI command to its end: { code, signal, stdout, stderr }. */
export async function runCli(args, env, timeoutMs = 120_000) {
  const { spawn } = await import('node:child_process');
  const child = track(spawn(process.execPath, ['--enable-source-maps', MAIN, ...args], { env, cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] }));
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [code, signal] = await new Promise((r) => child.on('close', (c, s) => r([c, s])));
  clearTimeout(timer);
  return { code, signal, stdout, stderr };
}

/**
 * @param {{ env: NodeJS.ProcessEnv, logDir: string, counts: Record<string, number>, concurrency: Record<string, number | undefined>, slotEnv?: Record<string, Record<string, string>[]>, log: (line: string) => void }} options
 *   slotEnv: settings of a role's slots, by slot (the first of them, ...), over `env`; a restart keeps its slot's
 */
export function startFleet({ env, logDir, counts, concurrency, slotEnv = {}, log }) {
  /** @type {Record<string, (import('node:child_process').ChildProcess | undefined)[]>} */
  const slots = Object.fromEntries(ROLES.map((r) => [r, Array(counts[r]).fill(undefined)]));
  const kills = Object.fromEntries(ROLES.map((r) => [r, 0]));
  const unexpectedExits = [];
  const starts = Object.fromEntries(ROLES.map((r) => [r, 0]));
  let stopping = false;

  const spawnSlot = (role, i) => {
    starts[role]++;
    const args = ['--enable-source-maps', MAIN, 'worker', role, ...(concurrency[role] ? ['--concurrency', String(concurrency[role])] : [])];
    const logFile = join(logDir, `${role}-${i + 1}.log`);
    const child = spawnLogged(process.execPath, args, {
      env: { ...env, ...slotEnv[role]?.[i] },
      cwd: ROOT,
      logFile,
      onOutput: (text) => {
        if (!child.ready && text.includes('"msg":"worker ready"')) child.ready = true;
      },
    });
    child.logFile = logFile;
    child.ready = false;
    child.killedByHarness = false;
    slots[role][i] = child;
    child.exited.then(({ code, signal }) => {
      if (stopping || child.killedByHarness || slots[role][i] !== child) return;
      unexpectedExits.push({ role, slot: i + 1, pid: child.pid, code, signal, at: new Date().toISOString() });
      log(`${role}-${i + 1} (pid ${child.pid}) exited by itself: code ${code} signal ${signal}; restarting it in 1 s`);
      setTimeout(() => {
        if (!stopping && slots[role][i] === child) spawnSlot(role, i);
      }, 1000);
    });
  };
  for (const role of ROLES) for (let i = 0; i < counts[role]; i++) spawnSlot(role, i);

  return {
    kills,
    starts,
    unexpectedExits,
    /** The roles with a process that is ready (serving its queue): killing a booting one tests nothing. */
    readyRoles() {
      return ROLES.filter((r) => slots[r].some((c) => c?.ready));
    },
    /** kill -9 of a random ready process of the role, restarted at once; returns its slot. */
    async killAndRestart(role, random = Math.random) {
      const ready = slots[role].map((c, i) => (c?.ready ? i : -1)).filter((i) => i >= 0);
      if (ready.length === 0) return undefined;
      const i = ready[Math.floor(random() * ready.length)];
      const child = slots[role][i];
      child.killedByHarness = true;
      await kill9(child);
      appendFileSync(child.logFile, `--- chaos: kill -9 of pid ${child.pid} at ${new Date().toISOString()} ---\n`);
      kills[role]++;
      if (!stopping) spawnSlot(role, i);
      return { role, slot: i + 1, pid: child.pid };
    },
    /** Every worker SIGTERM (in-flight jobs finish), SIGKILL after 10 s. */
    async stop() {
      stopping = true;
      const all = Object.values(slots).flat().filter(Boolean);
      return Promise.all(all.map((c) => stopGently(c, 10_000)));
    },
  };
}
