// The fuzzer's fleet: fetchers, parsers, writers and renderers as separate processes, each slot kept
// alive like a supervisor would (the chaos suite's fleet, with the render stage and per-slot settings:
// PARSE_IN_FETCHER, a skewed clock).
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MAIN, ROOT } from '../chaos/fleet.mjs';
import { kill9, spawnLogged, stopGently } from '../chaos/processes.mjs';

export const FUZZ_ROLES = ['fetcher', 'parser', 'writer', 'renderer'];

/** A process's resident memory (bytes), or 0 once it is gone. */
export function rssOf(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/**
 * @param {{ env: NodeJS.ProcessEnv, logDir: string, counts: Record<string, number>, slotEnv: Record<string, Record<string, string>[]>, log: (line: string) => void }} options
 */
export function startFuzzFleet({ env, logDir, counts, slotEnv, log }) {
  const slots = Object.fromEntries(FUZZ_ROLES.map((r) => [r, Array(counts[r] ?? 0).fill(undefined)]));
  const unexpectedExits = [];
  let stopping = false;

  const spawnSlot = (role, i) => {
    const logFile = join(logDir, `${role}-${i + 1}.log`);
    const child = spawnLogged(process.execPath, ['--enable-source-maps', MAIN, 'worker', role, '--concurrency', role === 'renderer' ? '2' : '4'], {
      env: { ...env, ...slotEnv[role]?.[i] },
      cwd: ROOT,
      logFile,
      onOutput: (text) => {
        if (!child.ready && text.includes('"msg":"worker ready"')) child.ready = true;
      },
    });
    Object.assign(child, { logFile, ready: false, killedByHarness: false });
    slots[role][i] = child;
    child.exited.then(({ code, signal }) => {
      if (stopping || child.killedByHarness || slots[role][i] !== child) return;
      unexpectedExits.push({ role, slot: i + 1, code, signal });
      log(`${role}-${i + 1} (pid ${child.pid}) exited by itself: code ${code} signal ${signal}; restarting it in 1 s`);
      setTimeout(() => !stopping && slots[role][i] === child && spawnSlot(role, i), 1000);
    });
  };
  for (const role of FUZZ_ROLES) for (let i = 0; i < (counts[role] ?? 0); i++) spawnSlot(role, i);

  return {
    unexpectedExits,
    roles: () => FUZZ_ROLES.filter((r) => slots[r].length > 0),
    /** Resident memory of every live worker, by name. */
    rss() {
      const out = {};
      for (const role of FUZZ_ROLES) {
        for (const [i, c] of slots[role].entries()) if (c && c.exitCode === null) out[`${role}-${i + 1}`] = rssOf(c.pid);
      }
      return out;
    },
    /** kill -9 of a ready process of the role, restarted at once. */
    async killAndRestart(role, random) {
      // Two kill steps may overlap (a role's and any role's): a child another step is killing is not
      // picked, and only the step that killed a slot's child restarts it. Else both restarted it,
      // and the first new process ran on unseen (seed 1191439978:long: 7 Chromium processes and a
      // renderer's directory left at the end, and its job in the delayed set after done).
      const ready = slots[role].map((c, i) => (c?.ready && !c.killedByHarness ? i : -1)).filter((i) => i >= 0);
      if (ready.length === 0) return undefined;
      const i = ready[Math.floor(random() * ready.length)];
      const child = slots[role][i];
      child.killedByHarness = true;
      await kill9(child);
      appendFileSync(child.logFile, `--- fuzz: kill -9 of pid ${child.pid} at ${new Date().toISOString()} ---\n`);
      if (!stopping && slots[role][i] === child) spawnSlot(role, i);
      return { role, slot: i + 1, pid: child.pid };
    },
    /** SIGTERM to every worker; one still there 15 s later is killed, and the log says so (what it leaves is its own). */
    async stop() {
      stopping = true;
      const live = FUZZ_ROLES.flatMap((role) => slots[role].map((c, i) => ({ role, i, c }))).filter(({ c }) => c && c.exitCode === null && c.signalCode === null);
      await Promise.all(
        live.map(async ({ role, i, c }) => {
          const { signal } = await stopGently(c, 15_000);
          if (signal === 'SIGKILL') log(`${role}-${i + 1} (pid ${c.pid}) did not stop within 15 s of SIGTERM: killed`);
        }),
      );
    },
  };
}
