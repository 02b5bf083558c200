import type { RedisClient } from './redis.js';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Loads the Lua scripts of `lua/` (one atomic operation each, named `verbNoun-<numKeys>.lua`, or
 * `verbNoun-v.lua` for a script that takes a variable number of keys) and
 * registers them on a connection under a versioned name, so two fleet versions can share one Redis.
 */
export const SCRIPT_VERSION = 9;
const LUA_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'lua');

const SCRIPT_FILES = {
  registerCrawl: 'registerCrawl-2.lua',
  beginInjection: 'beginInjection-2.lua',
  endInjection: 'endInjection-2.lua',
  markDone: 'markDone-2.lua',
  markPartDone: 'markPartDone-1.lua',
  noteInvalid: 'noteInvalid-1.lua',
  collectCrawl: 'collectCrawl-2.lua',
  admitUrls: 'admitUrls-7.lua',
  takeReady: 'takeReady-6.lua',
  beginJob: 'beginJob-5.lua',
  finishJob: 'finishJob-12.lua',
  delayJob: 'delayJob-6.lua',
  rewindUrl: 'rewindUrl-9.lua',
  replayDeadLetter: 'replayDeadLetter-8.lua',
  acquireHost: 'acquireHost-2.lua',
  takeProxy: 'takeProxy-v.lua',
  applySessionChoice: 'applySessionChoice-v.lua',
  retireSession: 'retireSession-3.lua',
  storeSessionCookies: 'storeSessionCookies-2.lua',
  undoHost: 'undoHost-2.lua',
  releaseHost: 'releaseHost-2.lua',
  proxyOutcome: 'proxyOutcome-1.lua',
} as const;

export type ScriptName = keyof typeof SCRIPT_FILES;
/** Every script's name. */
export const SCRIPT_NAMES = Object.keys(SCRIPT_FILES) as ScriptName[];

/** A script's Lua with its `--!include`s expanded, each include once (an include may include another). */
function readLua(file: string, included = new Set<string>()): string {
  const text = readFileSync(join(LUA_DIR, file), 'utf8');
  return text.replace(/^--!include (\S+)$/gm, (_line, name: string) => {
    if (included.has(name)) return `-- (${name}: included above)`;
    included.add(name);
    return readLua(join('includes', name), included);
  });
}

/**
 * Every script is read when this module loads, not on first use: a process keeps running the scripts
 * it started with when a deploy replaces the files under it (a lazy read of a renamed file failed
 * every job of the workers that had not yet used it). numberOfKeys is undefined for a script with a
 * variable number of keys.
 */
const loaded = new Map<ScriptName, { lua: string; numberOfKeys: number | undefined }>(
  (Object.entries(SCRIPT_FILES) as [ScriptName, string][]).map(([name, file]) => {
    const fixed = /-(\d+)\.lua$/.exec(file);
    return [name, { lua: readLua(file), numberOfKeys: fixed ? Number(fixed[1]) : undefined }];
  }),
);
function script(name: ScriptName) {
  return loaded.get(name)!;
}

/** A script's Lua as Redis runs it (includes expanded): its SHA1 names it in SLOWLOG and MONITOR. */
export function scriptSource(name: ScriptName): string {
  return script(name).lua;
}

const registered = new WeakSet<RedisClient>();

/** Runs one script atomically. `keys` must all share one hash slot. */
export async function runScript<T = unknown>(redis: RedisClient, name: ScriptName, keys: string[], args: (string | number)[]): Promise<T> {
  const { numberOfKeys } = script(name);
  if (numberOfKeys !== undefined && keys.length !== numberOfKeys) throw new Error(`${name} takes ${numberOfKeys} keys, got ${keys.length}`);
  if (!registered.has(redis)) {
    for (const n of Object.keys(SCRIPT_FILES) as ScriptName[]) {
      const s = script(n);
      redis.defineCommand(`crawlfleet_v${SCRIPT_VERSION}_${n}`, s.numberOfKeys === undefined ? { lua: s.lua } : { lua: s.lua, numberOfKeys: s.numberOfKeys });
    }
    registered.add(redis);
  }
  const command = (redis as unknown as Record<string, (...a: (string | number)[]) => Promise<T>>)[`crawlfleet_v${SCRIPT_VERSION}_${name}`]!;
  return numberOfKeys === undefined ? command.call(redis, keys.length, ...keys, ...args) : command.call(redis, ...keys, ...args);
}
