import { createHash, randomUUID } from 'node:crypto';
import { lstat, mkdir, readFile, readdir, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { SourceMap } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, extname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { BuildResult, Loader, Plugin } from 'esbuild';
import { ConfigError, CrawlfleetError, NonRetryableError, errorMessage } from '../errors.js';
import { CODE_KEYS, type CodeKey, type SpiderCode, type SpiderModuleRef } from './code.js';
import { validateSpider } from './load.js';
import type { Spider } from './schema.js';

export const MODULE_EXTENSIONS = new Set(['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs']);

/** The repository (or image) crawlfleet runs from: its node_modules serve spiders that have none. */
const INSTALL_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const OWN_PACKAGES = join(INSTALL_ROOT, 'packages') + sep;

/** A spider module compiled, imported and split into settings and code. */
export interface LoadedSpiderModule {
  ref: SpiderModuleRef;
  spider: Spider;
  code: SpiderCode;
  /** `books.ts:23`: where in the spider's own source an error thrown by a hook was raised */
  locate(err: unknown): string | undefined;
}

interface Bundle {
  js: string;
  map: SourceMap;
  hash: string;
}

/**
 * Compiles a spider module (TypeScript or JavaScript) and its local imports into one ES module with
 * esbuild, so a worker needs no TypeScript tool chain and no node_modules next to the spider. The
 * hash covers the spider's own files (not its packages), so two workers agree on it however they
 * were installed.
 */
async function bundle(path: string): Promise<Bundle> {
  const esbuild = await import('esbuild');
  const dir = dirname(path);
  // The spider's own files, as esbuild compiled them: the hash covers the very bytes in the bundle,
  // so a file edited while a worker compiles cannot give old code the new hash.
  const own = new Map<string, Buffer>();
  const hashOwnFiles: Plugin = {
    name: 'crawlfleet-own-files',
    setup(build) {
      build.onLoad({ filter: /\.(m|c)?(t|j)sx?$|\.json$/ }, async (args) => {
        if (args.namespace !== 'file' || isPackageFile(args.path)) return undefined;
        const contents = await readFile(args.path);
        own.set(args.path, contents);
        return { contents, loader: loaderFor(args.path) };
      });
    },
  };
  let result: BuildResult<{ write: false }>;
  try {
    result = await esbuild.build({
      entryPoints: [path],
      absWorkingDir: dir,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      write: false,
      plugins: [hashOwnFiles],
      sourcemap: 'external',
      sourcesContent: false,
      // never written: it only makes the source map's paths relative to the spider's folder
      outfile: join(dir, 'spider.bundle.mjs'),
      nodePaths: [join(INSTALL_ROOT, 'node_modules')],
      logLevel: 'silent',
      // bundled CommonJS packages may require Node's built-ins
      banner: { js: "import { createRequire as __crawlfleetRequire } from 'node:module'; const require = __crawlfleetRequire(import.meta.url);" },
    });
  } catch (err) {
    const errors = (err as { errors?: Array<{ text: string; location?: { file: string; line: number; column: number } | null }> }).errors;
    if (!errors) throw new ConfigError(`${path}: cannot compile the spider module: ${errorMessage(err)}`, { file: path, cause: err });
    const issues = errors.map((e) => (e.location ? `${e.location.file}:${e.location.line}:${e.location.column + 1}: ${e.text}` : e.text));
    throw new ConfigError(`${path}: cannot compile the spider module:\n  ${issues.join('\n  ')}`, { file: path, issues, cause: err });
  }
  const js = result.outputFiles.find((f) => f.path.endsWith('.mjs'))!.text;
  const mapText = result.outputFiles.find((f) => f.path.endsWith('.map'))!.text;
  if (own.size === 0)
    throw new ConfigError(`${path}: no source file of the spider's own was compiled (a spider inside crawlfleet's packages/ or a node_modules folder cannot be versioned)`, { file: path });
  const hash = createHash('sha256');
  for (const file of [...own.keys()].sort()) hash.update(relative(dir, file)).update('\0').update(own.get(file)!).update('\0');
  return { js, map: new SourceMap(JSON.parse(mapText) as never), hash: hash.digest('hex').slice(0, 16) };
}

/** A package's file (crawlfleet's own or under node_modules): compiled into the bundle, not hashed. */
function isPackageFile(file: string): boolean {
  return file.split(sep).includes('node_modules') || file.startsWith(OWN_PACKAGES);
}

function loaderFor(file: string): Loader {
  const ext = extname(file).toLowerCase();
  if (ext === '.json') return 'json';
  if (ext.endsWith('tsx')) return 'tsx';
  if (ext.endsWith('jsx')) return 'jsx';
  return ext.includes('t') && ext !== '.mjs' && ext !== '.cjs' ? 'ts' : 'js';
}

/** Bundles not used for this long are deleted when a new one is written: each version of a spider leaves one. */
export const SPIDER_CACHE_MAX_AGE_MS = 7 * 24 * 3600_000;

/** Deletes the cache's bundles last touched before `maxAgeMs` ago; best effort (another worker may be at it too). */
export async function pruneSpiderCache(cacheDir: string, maxAgeMs = SPIDER_CACHE_MAX_AGE_MS, now = Date.now()): Promise<number> {
  let removed = 0;
  for (const name of await readdir(cacheDir).catch(() => [] as string[])) {
    if (!name.endsWith('.mjs') && !name.endsWith('.tmp')) continue;
    const file = join(cacheDir, name);
    const info = await stat(file).catch(() => undefined);
    if (info && now - info.mtimeMs > maxAgeMs) {
      await rm(file, { force: true });
      removed++;
    }
  }
  return removed;
}

/**
 * The folder bundles are written to: CRAWLFLEET_SPIDER_CACHE, else one of this user's own in the
 * temporary folder, private (0700) and checked to be theirs, since whatever is in it gets imported.
 */
async function spiderCacheDir(): Promise<string> {
  if (process.env.CRAWLFLEET_SPIDER_CACHE) return process.env.CRAWLFLEET_SPIDER_CACHE;
  const uid = process.getuid?.() ?? 0;
  const dir = join(tmpdir(), `crawlfleet-spiders-${uid}`);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const info = await lstat(dir);
  if (!info.isDirectory() || info.uid !== uid || (info.mode & 0o022) !== 0) {
    throw new Error(`${dir} is not a private folder of this user; set CRAWLFLEET_SPIDER_CACHE to one`);
  }
  return dir;
}

let imports = 0;

/**
 * Writes the bundle where Node can import it (once per content) and imports it. Each import has a
 * URL of its own, so a module that failed while loading is loaded afresh next time (Node keeps a
 * failed import's error under its URL).
 */
async function importBundle(path: string, js: string): Promise<{ exported: unknown; url: string }> {
  const digest = createHash('sha256').update(js).digest('hex').slice(0, 16);
  const cacheDir = await spiderCacheDir();
  const file = join(cacheDir, `${basename(path).replace(/[^A-Za-z0-9_.-]/g, '_')}-${digest}.mjs`);
  const current = await readFile(file, 'utf8').catch(() => undefined);
  if (current === js) {
    // in use: the prune of old bundles goes by this time
    const now = new Date();
    await utimes(file, now, now).catch(() => undefined);
  } else {
    await mkdir(cacheDir, { recursive: true });
    const partial = `${file}.${randomUUID()}.tmp`;
    await writeFile(partial, js);
    await rename(partial, file);
    await pruneSpiderCache(cacheDir);
  }
  const url = `${pathToFileURL(file).href}?load=${++imports}`;
  const mod = (await import(url)) as { default?: unknown; spider?: unknown };
  return { exported: mod.default ?? mod.spider, url };
}

/** Pure: the settings and the code of a module's export; a wrong shape names the file and key. */
export function splitSpiderModule(exported: unknown, file: string): { spider: Spider; code: SpiderCode } {
  if (typeof exported !== 'object' || exported === null || Array.isArray(exported)) {
    throw new ConfigError(`${file}: (module): the module must export its spider as the default export: export default defineSpider({ ... })`, { file });
  }
  const settings: Record<string, unknown> = {};
  const code: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(exported)) {
    if ((CODE_KEYS as readonly string[]).includes(key)) {
      if (value !== undefined) code[key] = value;
    } else settings[key] = value;
  }
  const issues: string[] = [];
  for (const hook of ['parse', 'request', 'item'] as const satisfies readonly CodeKey[]) {
    if (code[hook] !== undefined && typeof code[hook] !== 'function') issues.push(`${file}: ${hook}: must be a function, got ${typeof code[hook]}`);
  }
  const schemas = code.schemas;
  if (schemas !== undefined) {
    if (typeof schemas !== 'object' || schemas === null || Array.isArray(schemas)) issues.push(`${file}: schemas: must be an object of zod schemas, one per item type`);
    else {
      for (const [type, schema] of Object.entries(schemas)) {
        if (typeof (schema as { safeParse?: unknown } | null)?.safeParse !== 'function') issues.push(`${file}: schemas.${type}: must be a zod schema (an object with safeParse)`);
      }
    }
  }
  let spider: Spider | undefined;
  try {
    spider = validateSpider(settings, file);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    issues.unshift(...err.issues);
  }
  if (issues.length > 0) throw new ConfigError(`invalid spider:\n  ${issues.join('\n  ')}`, { file, issues });
  return { spider: spider!, code: code as SpiderCode };
}

/** Pure: the first frame of `stack` in the bundle imported from `bundleUrl`, as a place in the spider's own source. */
export function locateInSource(stack: string, bundleUrl: string, map: SourceMap): string | undefined {
  let fallback: string | undefined;
  // A frame names the module by its URL (query included or not, by runtime) or by its path.
  const fileUrl = bundleUrl.split('?')[0]!;
  const names = [fileUrl, fileURLToPath(fileUrl)];
  for (const line of stack.split('\n')) {
    const name = names.find((n) => line.includes(n));
    if (name === undefined) continue;
    const m = /^(?:\?[^:\s]*)?:(\d+):(\d+)/.exec(line.slice(line.indexOf(name) + name.length));
    if (!m) continue;
    const entry = map.findEntry(Number(m[1]) - 1, Number(m[2]) - 1) as { originalSource?: string; originalLine?: number; originalColumn?: number };
    if (entry.originalSource === undefined || entry.originalLine === undefined) continue;
    const source = entry.originalSource.startsWith('file://') ? fileURLToPath(entry.originalSource) : entry.originalSource;
    const place = `${source}:${entry.originalLine + 1}`;
    // A frame in a bundled package is where it threw; the spider's own frame is where its author looks.
    if (!source.split(/[\\/]/).includes('node_modules')) return place;
    fallback ??= place;
  }
  return fallback;
}

/**
 * Compiles and imports a spider module, checking its exported shape. Hooks are not run. With
 * `expectHash`, a module whose code hashes otherwise is refused before it is imported (its code
 * never runs here): SpiderHashMismatch.
 */
export async function loadSpiderModule(file: string, expectHash?: string): Promise<LoadedSpiderModule> {
  const path = resolve(file);
  const exists = await stat(path).then(
    (s) => s.isFile(),
    () => false,
  );
  if (!exists) throw new ConfigError(`${file}: cannot read spider file: no such file`, { file });
  const built = await bundle(path);
  if (expectHash !== undefined && built.hash !== expectHash) throw new SpiderHashMismatch(path, built.hash, expectHash);
  let imported: { exported: unknown; url: string };
  try {
    imported = await importBundle(path, built.js);
  } catch (err) {
    throw new ConfigError(`${file}: the spider module failed while loading: ${errorMessage(err)}`, { file, cause: err });
  }
  const { spider, code } = splitSpiderModule(imported.exported, file);
  return {
    ref: { path, hash: built.hash },
    spider,
    code,
    locate: (err) => (err instanceof Error && err.stack ? locateInSource(err.stack, imported.url, built.map) : undefined),
  };
}

/** The spider file here is another version than the one a crawl was seeded with. */
export class SpiderHashMismatch extends Error {
  constructor(
    readonly path: string,
    readonly found: string,
    readonly expected: string,
  ) {
    super(`spider module ${path} on this worker has hash ${found}, but the crawl was seeded with ${expected}`);
  }
}

/**
 * This worker's copy of a crawl's spider module is another version than the crawl's, for less than
 * the deploy wait so far: the job waits `waitMs` and tries again (a rolling deploy in progress).
 */
export class SpiderVersionPending extends CrawlfleetError {
  constructor(
    message: string,
    readonly waitMs: number,
  ) {
    super('ERR_SPIDER_VERSION_PENDING', message);
  }
}

/** How long a worker waits for the crawl's version of a spider file before its jobs are dead-lettered. */
export const SPIDER_DEPLOY_WAIT_MS = 10 * 60_000;

/**
 * A worker's spider modules, by the reference each crawl recorded at seed time. A copy whose hash
 * differs from the recorded one is never imported: a fleet never runs two versions of one crawl's
 * code. During a rolling deploy the file arrives on each worker at its own time, so for
 * `deployWaitMs` after this worker first found the wrong copy its jobs wait (SpiderVersionPending)
 * and the file is compiled again every `retryFailuresAfterMs`; after that they are dead-lettered
 * ERR_SPIDER_VERSION (replayable). A refusal is remembered for `retryFailuresAfterMs`, so a
 * crawl's every job does not compile the file again.
 */
export class SpiderModules {
  private readonly loaded = new Map<string, { failedAt: number; result: Promise<LoadedSpiderModule> }>();
  /** since when this worker has had another version of a module than the one a crawl wants */
  private readonly mismatchSince = new Map<string, number>();
  constructor(
    private readonly retryFailuresAfterMs = 5000,
    private readonly deployWaitMs = SPIDER_DEPLOY_WAIT_MS,
  ) {}

  get(ref: SpiderModuleRef): Promise<LoadedSpiderModule> {
    const key = `${ref.path}\0${ref.hash}`;
    const cached = this.loaded.get(key);
    if (cached && !(cached.failedAt > 0 && Date.now() - cached.failedAt > this.retryFailuresAfterMs)) return cached.result;
    const entry = { failedAt: 0, result: this.load(ref) };
    entry.result.catch(() => (entry.failedAt = Date.now()));
    this.loaded.set(key, entry);
    return entry.result;
  }

  /** A module this process loaded already (the crawl command's own spider): no second compile. */
  remember(loaded: LoadedSpiderModule): void {
    this.loaded.set(`${loaded.ref.path}\0${loaded.ref.hash}`, { failedAt: 0, result: Promise.resolve(loaded) });
  }

  private async load(ref: SpiderModuleRef): Promise<LoadedSpiderModule> {
    const key = `${ref.path}\0${ref.hash}`;
    try {
      const loaded = await loadSpiderModule(ref.path, ref.hash);
      this.mismatchSince.delete(key);
      return loaded;
    } catch (err) {
      if (!(err instanceof SpiderHashMismatch)) {
        throw new NonRetryableError('ERR_SPIDER_MODULE', `cannot load the crawl's spider module ${ref.path} on this worker: ${errorMessage(err)}`, { file: ref.path }, { cause: err });
      }
      const now = Date.now();
      const since = this.mismatchSince.get(key) ?? now;
      this.mismatchSince.set(key, since);
      const waited = now - since;
      if (waited < this.deployWaitMs) {
        throw new SpiderVersionPending(`${err.message}: waiting for the deploy (${Math.round(waited / 1000)} s of at most ${Math.round(this.deployWaitMs / 1000)} s)`, this.retryFailuresAfterMs);
      }
      throw new NonRetryableError('ERR_SPIDER_VERSION', `${err.message}, for ${Math.round(waited / 1000)} s: deploy the same spider to every worker (or seed again), then replay`, { file: ref.path });
    }
  }
}
