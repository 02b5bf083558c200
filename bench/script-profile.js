// Redis time per script: which of the page's scripts (ours and BullMQ's) and commands Redis spends
// its time in. SLOWLOG with a threshold of 0 records every command Redis runs for a client, with its
// execution time in microseconds (a script's time includes the commands it runs; the reading and
// writing of sockets is not in it). A script call is named by its SHA1: ours from their sources
// (@crawlfleet/core's scriptSource), BullMQ's from the scripts it ships.
//
// Turned on for a run with BENCH_PROFILE=1: it costs Redis a little memory and time per command, so a
// profiled run's pages/s is not the figure to compare.
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { SCRIPT_NAMES, scriptSource } from '@crawlfleet/core';

const ROOT = new URL('..', import.meta.url).pathname;
const sha1 = (text) => createHash('sha1').update(text).digest('hex');

/** SHA1 -> a readable name, for crawlfleet's scripts and BullMQ's. */
async function scriptNames() {
  const names = new Map(SCRIPT_NAMES.map((n) => [sha1(scriptSource(n)), n]));
  const dir = join(ROOT, 'node_modules/bullmq/dist/esm/scripts');
  for (const file of readdirSync(dir).filter((f) => /^[a-zA-Z]+-\d+\.js$/.test(f))) {
    const mod = await import(join(dir, file));
    for (const def of Object.values(mod)) if (def?.content) names.set(sha1(def.content), `bullmq:${def.name}`);
  }
  return names;
}

const ENTRIES = 4_000_000;

/** Starts recording every command's time on this Redis (a dedicated bench server). */
export async function startScriptProfile(redis) {
  await redis.config('SET', 'slowlog-max-len', String(ENTRIES));
  await redis.config('SET', 'slowlog-log-slower-than', '0');
  await redis.slowlog('RESET');
}

/**
 * Stops recording; `perPage(pages)` of the result gives, per script or command, its calls and Redis
 * microseconds per page, busiest first, with the total. SLOWLOG keeps the newest ENTRIES entries: a
 * longer run is cut (`truncated`).
 */
export async function stopScriptProfile(redis) {
  await redis.config('SET', 'slowlog-log-slower-than', '10000');
  const entries = await redis.slowlog('GET', '-1');
  await redis.slowlog('RESET');
  await redis.config('SET', 'slowlog-max-len', '128');
  const names = await scriptNames();
  return { perPage: (pages) => summarise(entries, names, pages) };
}

/**
 * Pure: SLOWLOG entries ([id, time, micros, args, client, ...]) summed by script name or command.
 * A command a script runs is logged too, from the client "?:0": its time is inside its script's
 * already, so it is summed apart (`insideScripts`), not into the total.
 */
export function summarise(entries, names, pages) {
  const top = new Map();
  const inside = new Map();
  let total = 0;
  const add = (map, name, micros) => {
    const row = map.get(name) ?? { calls: 0, micros: 0 };
    row.calls++;
    row.micros += micros;
    map.set(name, row);
  };
  for (const [, , micros, args, client] of entries) {
    const command = String(args[0]).toLowerCase();
    if (command === 'slowlog' || command === 'config') continue;
    if (client === '?:0') {
      add(inside, command, Number(micros));
      continue;
    }
    const name = command === 'evalsha' || command === 'eval' ? (names.get(command === 'evalsha' ? String(args[1]) : sha1(String(args[1]))) ?? `${command}:unknown`) : command;
    add(top, name, Number(micros));
    total += Number(micros);
  }
  const per = (x) => Number((x / pages).toFixed(2));
  const table = (map, of) =>
    Object.fromEntries(
      [...map.entries()]
        .sort((a, b) => b[1].micros - a[1].micros)
        .map(([name, row]) => [name, { callsPerPage: per(row.calls), microsPerPage: per(row.micros), ...(of ? { share: Number((row.micros / of).toFixed(3)) } : {}) }]),
    );
  return {
    entries: entries.length,
    truncated: entries.length >= ENTRIES,
    microsPerPage: per(total),
    byScript: table(top, total),
    insideScripts: table(inside),
  };
}
