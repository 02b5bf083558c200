import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, delimiter, dirname, join, relative } from 'node:path';
import { MongoClient } from 'mongodb';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import ajv2019 from 'ajv/dist/2019.js';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { BOOKS_ARCHIVE, unpack } from '../fixtures/static-site.mjs';
import { booksTruth } from '../helpers/books-truth.js';
import { CLI, ROOT, comparable, tempDir } from '../helpers/cli.js';
import { startMongo, type MongoServer } from '../helpers/mongo.js';
import { freePort, waitForPort } from '../helpers/ports.js';

/**
 * docker-compose.yml, without a Docker engine:
 *  - Debian's docker-compose (1.29) accepts it (`config`, which needs no engine), and renders it as
 *    this test reads it (interpolation of ${VAR:-default}, YAML anchors and merge keys);
 *  - it validates against the compose-spec JSON schema that docker-compose ships;
 *  - its wiring is real: every service's own command, environment, depends_on and healthcheck runs
 *    here as a local process (redis-server for redis, FerretDB for mongo, bin/crawlfleet for the
 *    crawlfleet image, node for the demo site, three fetchers for --scale fetcher=3), the service
 *    names mapped to loopback ports, and the demo crawl ends with exactly the expected items in
 *    MongoDB, shown by the dashboard.
 * What it cannot show: that the image builds and runs, that Docker's DNS, networks, volumes and
 * healthchecks behave as assumed. scripts/test-containers.sh (test/containers/run.mjs) shows those, with
 * a real Docker engine and Compose v5.
 */

const COMPOSE_FILE = join(ROOT, 'docker-compose.yml');
const ENV_EXAMPLE = join(ROOT, '.env.example');
const DOCKERFILE = join(ROOT, 'infra', 'Dockerfile');
const DOCKERIGNORE = join(ROOT, '.dockerignore');
const MONITORING = join(ROOT, 'infra', 'monitoring');
const GRAFANA_DASHBOARD = join(MONITORING, 'grafana', 'dashboards', 'crawlfleet.json');

const IMAGE = 'crawlfleet:latest';
/** The renderer's image: the same build on a base with Chromium (infra/Dockerfile, VARIANT=renderer). */
const RENDERER_IMAGE = 'crawlfleet-renderer:latest';
const WORKERS = { fetcher: { grace: '60s' }, parser: { grace: '60s' }, writer: { grace: '120s' } } as const;
/** `docker compose up --scale fetcher=3` */
const SCALE: Record<string, number> = { fetcher: 3 };

/** The metric names the fleet exports (README, "Watching the fleet"); the Grafana dashboard may use these only. */
const KNOWN_METRICS = [
  'crawlfleet_queue_backlog',
  'crawlfleet_queue_jobs',
  'crawlfleet_pages_fetched_total',
  'crawlfleet_items_parsed_total',
  'crawlfleet_items_written_total',
  'crawlfleet_http_responses_total',
  'crawlfleet_fetch_duration_seconds',
  'crawlfleet_downloaded_bytes_total',
  'crawlfleet_retries_total',
  'crawlfleet_blocks_total',
  'crawlfleet_deferrals_total',
  'crawlfleet_dead_letters_total',
  // the crawls' counters, crawlfleet_crawl_<counter>_total, selected together: {__name__=~"crawlfleet_crawl_.+_total"}
  'crawlfleet_crawl_',
  'crawlfleet_proxy_requests_total',
  'crawlfleet_proxy_failures_total',
  'crawlfleet_proxy_blocks_total',
  'crawlfleet_proxy_up',
  'crawlfleet_write_batch_items',
  'crawlfleet_write_batch_duration_seconds',
  'crawlfleet_sinks_unavailable',
];
/** Grafana's datasource variable, as the dashboard's panels name their datasource (not a JS template). */
const DATASOURCE_VARIABLE = ['$', '{datasource}'].join('');
/** What the dashboard must show (each of these in at least one expr). */
const REQUIRED_IN_DASHBOARD = KNOWN_METRICS;

// ---------------------------------------------------------------------------------------------
// Reading the compose file as Compose does: YAML 1.1 merge keys, then interpolation.

type Env = Record<string, string>;
interface Healthcheck {
  test: string[] | string;
  interval?: string;
  timeout?: string;
  retries?: number;
  start_period?: string;
}
interface Service {
  image?: string;
  pull_policy?: string;
  build?: { context: string; dockerfile?: string; args?: Record<string, string> } | string;
  entrypoint?: string[] | string;
  command?: string[] | string;
  environment?: Record<string, string | number | boolean | null>;
  healthcheck?: Healthcheck;
  depends_on?: Record<string, { condition: string }> | string[];
  profiles?: string[];
  restart?: string;
  stop_grace_period?: string;
  ports?: string[];
  volumes?: string[];
  tmpfs?: string[] | string;
  container_name?: string;
  init?: boolean;
  mem_limit?: string;
  shm_size?: string;
}
interface Compose {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
  [extension: string]: unknown;
}

/** KEY=value lines; # comments. No quoting: the values are plain (checked). */
function readEnvFile(path: string): Env {
  const env: Env = {};
  for (const [i, raw] of readFileSync(path, 'utf8').split('\n').entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (!m) throw new Error(`${path}:${i + 1}: not KEY=value: ${line}`);
    if (/^["']|\s#/.test(m[2]!)) throw new Error(`${path}:${i + 1}: quotes or trailing comments are read differently by Compose v1 and v2: ${line}`);
    env[m[1]!] = m[2]!;
  }
  return env;
}

/** Compose's interpolation: $$, $VAR, ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}, ${VAR:+alt}. */
function interpolate(text: string, env: Env, used: Set<string>): string {
  return text.replace(/\$(?:(\$)|\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*))/g, (_m, dollar?: string, braced?: string, bare?: string) => {
    if (dollar) return '$';
    if (bare) {
      used.add(bare);
      return env[bare] ?? '';
    }
    const m = /^([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?+])([^$]*))?$/s.exec(braced!);
    if (!m) throw new Error(`unsupported interpolation \${${braced}}`);
    const [, name, colon, op, arg = ''] = m as unknown as [string, string, string | undefined, string | undefined, string | undefined];
    used.add(name);
    const value = env[name];
    const unset = value === undefined || (colon === ':' && value === '');
    if (op === undefined) return value ?? '';
    if (op === '-') return unset ? arg : value!;
    if (op === '+') return unset ? '' : arg;
    if (unset) throw new Error(`required variable ${name} is not set: ${arg}`);
    return value!;
  });
}

function mapStrings(node: unknown, f: (s: string) => string): unknown {
  if (typeof node === 'string') return f(node);
  if (Array.isArray(node)) return node.map((n) => mapStrings(n, f));
  if (node !== null && typeof node === 'object') return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, mapStrings(v, f)]));
  return node;
}

function loadCompose(env: Env, file = COMPOSE_FILE): { compose: Compose; variables: Set<string> } {
  const raw = parseYaml(readFileSync(file, 'utf8'), { merge: true }) as unknown;
  const variables = new Set<string>();
  const compose = mapStrings(raw, (s) => interpolate(s, env, variables)) as Compose;
  return { compose, variables };
}

const list = (v: string[] | string | undefined): string[] => (v === undefined ? [] : Array.isArray(v) ? v.map(String) : [v]);
const envOf = (s: Service): Env => Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, v === null ? '' : String(v)]));
const dependsOn = (s: Service): Record<string, string> =>
  Array.isArray(s.depends_on) ? Object.fromEntries(s.depends_on.map((d) => [d, 'service_started'])) : Object.fromEntries(Object.entries(s.depends_on ?? {}).map(([k, v]) => [k, v.condition]));
const seconds = (d: string | undefined, fallback: number): number => {
  if (d === undefined) return fallback;
  const m = /^(?:(\d+)m)?(?:(\d+)s)?$/.exec(d);
  if (!m || d === '') throw new Error(`duration ${d}: this test reads NmNs only`);
  return Number(m[1] ?? 0) * 60 + Number(m[2] ?? 0);
};
const defaultServices = (c: Compose) => Object.entries(c.services).filter(([, s]) => !s.profiles || s.profiles.length === 0);

// ---------------------------------------------------------------------------------------------
// Debian's docker-compose (1.29) and its schema.

function dockerComposeBin(): string {
  const found = spawnSync('sh', ['-c', 'command -v docker-compose'], { encoding: 'utf8' });
  if (found.status !== 0) throw new Error('docker-compose is not installed: scripts/test.sh installs it (ensure_debian_package docker-compose docker-compose)');
  return found.stdout.trim();
}

/** docker-compose with no variable of ours in its environment: what it renders comes from the file (and --env-file). */
function dockerCompose(args: string[], options: { file?: string; envFile?: string; home: string }) {
  const argv = ['--project-directory', ROOT, '-f', options.file ?? COMPOSE_FILE, ...(options.envFile ? ['--env-file', options.envFile] : []), ...args];
  return spawnSync(dockerComposeBin(), argv, { encoding: 'utf8', env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: options.home }, timeout: 60_000 });
}

/** The compose-spec schema docker-compose validates with (its Python package's compose/config/compose_spec.json). */
function composeSpecPath(): string {
  dockerComposeBin();
  const out = spawnSync('/usr/bin/python3', ['-c', 'import compose.config, os; print(os.path.dirname(compose.config.__file__))'], { encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`cannot find docker-compose's Python package: ${out.stderr}`);
  const path = join(out.stdout.trim(), 'compose_spec.json');
  if (!existsSync(path)) throw new Error(`${path} is missing`);
  return path;
}

/**
 * An ajv validator for that schema. It is draft 2019-09 (its $schema names it), with draft-04 style
 * `id`s, which ajv refuses; each equals its own JSON pointer (checked), so dropping them changes no
 * reference. Its formats are docker-compose's own: ports, expose and subnet_ip_address as
 * docker-compose checks them (compose/config/validation.py, docker-py's PORT_SPEC), and duration as
 * Compose v2 reads it (a Go duration such as 1m30s). ajv-formats' "duration" is ISO 8601 (PT60S) and
 * would refuse every stop_grace_period; its ipv4 and ipv6 serve the subnets.
 */
function composeSchemaValidator() {
  const schema = JSON.parse(readFileSync(composeSpecPath(), 'utf8')) as Record<string, unknown>;
  expect(schema.$schema).toBe('http://json-schema.org/draft/2019-09/schema#');
  delete schema.$schema;
  const mismatched: string[] = [];
  const dropIds = (node: unknown, pointer: string): void => {
    if (Array.isArray(node)) {
      node.forEach((n, i) => {
        dropIds(n, `${pointer}/${i}`);
      });
    } else if (node !== null && typeof node === 'object') {
      const o = node as Record<string, unknown>;
      if (typeof o.id === 'string') {
        if (o.id !== pointer && !(pointer === '#' && o.id === 'compose_spec.json')) mismatched.push(`${pointer}: id ${o.id}`);
        delete o.id;
      }
      for (const [k, v] of Object.entries(o)) dropIds(v, `${pointer}/${k}`);
    }
  };
  dropIds(schema, '#');
  expect(mismatched).toEqual([]);
  const ipv4 = fullFormats.ipv4 as RegExp;
  const ipv6 = fullFormats.ipv6 as RegExp;
  const Ajv2019 = ajv2019.default;
  const ajv = new Ajv2019({ allErrors: true, allowUnionTypes: true });
  const PORT_SPEC = /^((\[?([a-fA-F\d.:]+)\]?:)?(\d*)(-(\d+))?:)?(\d+)(-(\d+))?(\/(udp|tcp|sctp))?$/;
  ajv.addFormat('ports', PORT_SPEC);
  ajv.addFormat('expose', /^\d+(-\d+)?(\/[a-zA-Z]+)?$/);
  ajv.addFormat('subnet_ip_address', (s: string) => {
    const [address = '', prefix = '', ...rest] = s.split('/');
    if (rest.length > 0 || !/^\d+$/.test(prefix)) return false;
    return (ipv4.test(address) && Number(prefix) <= 32) || (ipv6.test(address) && Number(prefix) <= 128);
  });
  ajv.addFormat('duration', /^-?(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/);
  return ajv.compile(schema);
}

// ---------------------------------------------------------------------------------------------
// The Dockerfile and its build context.

function dockerfileStages(): string[][] {
  const lines = readFileSync(DOCKERFILE, 'utf8')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const stages: string[][] = [];
  for (const line of lines) {
    if (/^FROM\s/i.test(line)) stages.push([]);
    stages.at(-1)?.push(line);
  }
  return stages;
}

/** .dockerignore as Docker reads it: patterns from the context root, `!` re-includes, the last match wins, a match on a folder covers what is in it. */
function dockerIgnored(path: string): boolean {
  const patterns = readFileSync(DOCKERIGNORE, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  // `**/` is any number of folders (none included), `**` anything, `*` and `?` within one name.
  const toRegex = (glob: string) => {
    let re = '';
    const g = glob.replace(/^\/+/, '').replace(/\/+$/, '');
    for (let i = 0; i < g.length; i++) {
      if (g.startsWith('**/', i)) {
        re += '(?:.*/)?';
        i += 2;
      } else if (g.startsWith('**', i)) {
        re += '.*';
        i += 1;
      } else if (g[i] === '*') re += '[^/]*';
      else if (g[i] === '?') re += '[^/]';
      else re += g[i]!.replace(/[.+^${}()|[\]\\]/g, '\\$&');
    }
    return new RegExp(`^${re}$`);
  };
  const prefixes = path.split('/').map((_, i, parts) => parts.slice(0, i + 1).join('/'));
  let ignored = false;
  for (const p of patterns) {
    const negated = p.startsWith('!');
    const re = toRegex(negated ? p.slice(1) : p);
    if (prefixes.some((prefix) => re.test(prefix))) ignored = !negated;
  }
  return ignored;
}

/** Where each file lands in the final image: COPY sources (files or folders of the context) to their destinations. */
function imageFiles(): Map<string, string> {
  const final = dockerfileStages().at(-1)!;
  const workdir =
    final
      .filter((l) => /^WORKDIR\s/i.test(l))
      .map((l) => l.split(/\s+/)[1]!)
      .at(-1) ?? '/';
  const files = new Map<string, string>();
  const walk = (rel: string): string[] => readdirSync(join(ROOT, rel), { withFileTypes: true }).flatMap((d) => (d.isDirectory() ? walk(join(rel, d.name)) : [join(rel, d.name)]));
  for (const line of final) {
    const m = /^COPY\s+(?!--from)(.*)$/i.exec(line);
    if (!m) continue;
    const parts = m[1]!.split(/\s+/);
    const dest = parts.pop()!;
    const destAbs = dest.startsWith('/') ? dest : join(workdir, dest);
    for (const src of parts) {
      if (!existsSync(join(ROOT, src))) throw new Error(`infra/Dockerfile copies ${src}, which does not exist`);
      if (statSync(join(ROOT, src)).isDirectory()) {
        for (const f of walk(src)) files.set(join(destAbs, relative(src, f)), f);
      } else {
        files.set(dest.endsWith('/') || parts.length > 1 ? join(destAbs, basename(src)) : destAbs, src);
      }
    }
  }
  return files;
}

// ---------------------------------------------------------------------------------------------
// Local processes standing in for containers.

interface Proc {
  name: string;
  child: ChildProcess;
  /** the tail of stdout and stderr, interleaved */
  output: () => string;
  stdout: () => string;
  exited: Promise<number | null>;
}

function startProc(name: string, argv: string[], env: Env): Proc {
  const child = spawn(argv[0]!, argv.slice(1), { env, cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let stdout = '';
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-20_000);
  };
  child.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
    keep(d);
  });
  child.stderr!.on('data', keep);
  const exited = new Promise<number | null>((resolve) => {
    child.on('error', (err) => {
      out += `\nspawn error: ${err.message}`;
      resolve(-1);
    });
    child.on('close', (code) => resolve(code));
  });
  return { name, child, output: () => out, stdout: () => stdout, exited };
}

async function runToEnd(name: string, argv: string[], env: Env, timeoutMs: number): Promise<{ code: number | null; output: string; stdout: string }> {
  const p = startProc(name, argv, env);
  const timer = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  const code = await p.exited;
  clearTimeout(timer);
  return { code, output: p.output(), stdout: p.stdout() };
}

/** A process's own environment in its container is the service's environment; here PATH and HOME are added (the image has them too). */
const PATH = [dirname(process.execPath), process.env.PATH ?? '/usr/bin:/bin'].join(delimiter);

describe('docker-compose.yml', () => {
  const home = tempDir('compose-home');
  const envExample = readEnvFile(ENV_EXAMPLE);
  const { compose, variables } = loadCompose(envExample);
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  describe('the file', () => {
    test('Debian docker-compose 1.29 accepts it, with and without its profiles, and renders what this test reads', () => {
      for (const args of [
        ['config', '-q'],
        ['--profile', 'monitoring', 'config', '-q'],
        ['--profile', 'render', 'config', '-q'],
      ]) {
        const run = dockerCompose(args, { home });
        expect({ args, status: run.status, stderr: run.stderr }).toEqual({ args, status: 0, stderr: '' });
      }
      // Its rendering, with .env.example as the .env file, equals this test's reading of the file.
      const rendered = dockerCompose(['--profile', 'monitoring', '--profile', 'render', 'config'], { home, envFile: ENV_EXAMPLE });
      expect(rendered.status).toBe(0);
      const theirs = mapStrings(parseYaml(rendered.stdout), (s) => s.replaceAll('$$', '$')) as Compose;
      const fields = (s: Service) => ({
        image: s.image,
        entrypoint: s.entrypoint === undefined ? undefined : list(s.entrypoint),
        command: s.command === undefined ? undefined : list(s.command),
        environment: envOf(s),
        healthcheck: s.healthcheck ? list(s.healthcheck.test) : undefined,
        depends_on: dependsOn(s),
        restart: s.restart,
        stop_grace_period: s.stop_grace_period,
        profiles: s.profiles,
      });
      expect(Object.keys(theirs.services).sort()).toEqual(Object.keys(compose.services).sort());
      for (const [name, service] of Object.entries(compose.services)) {
        expect({ name, ...fields(theirs.services[name]!) }).toEqual({ name, ...fields(service) });
      }
      // A broken copy is refused: the check has teeth.
      const broken = join(home, 'broken.yml');
      writeFileSync(broken, readFileSync(COMPOSE_FILE, 'utf8').replace('    stop_grace_period: 120s', '    stop_grace_period: 120s\n    replicas_of_writer: 2'));
      const refused = dockerCompose(['config', '-q'], { home, file: broken });
      expect(refused.status).not.toBe(0);
      expect(refused.stderr).toContain('replicas_of_writer');
    });

    test('it validates against the compose-spec schema docker-compose ships (ajv, draft 2019-09)', () => {
      const validate = composeSchemaValidator();
      expect(validate(compose) ? [] : validate.errors).toEqual([]);
      // So does the file read with no .env at all (the defaults in the file).
      expect(validate(loadCompose({}).compose) ? [] : validate.errors).toEqual([]);
      // The validator refuses what docker-compose refuses.
      const copy = () => JSON.parse(JSON.stringify(compose)) as Compose;
      const unknownKey = copy();
      (unknownKey.services.fetcher as Record<string, unknown>).replicas_of_fetcher = 3;
      expect(validate(unknownKey)).toBe(false);
      const badPort = copy();
      badPort.services.dashboard!.ports = ['127.0.0.1:3000:http'];
      expect(validate(badPort)).toBe(false);
      const badDuration = copy();
      badDuration.services.writer!.stop_grace_period = 'two minutes';
      expect(validate(badDuration)).toBe(false);
    });

    test('.env.example lists every variable the file reads, each with the default the file uses', () => {
      expect([...variables].sort()).toEqual(Object.keys(envExample).sort());
      // Reading the file without any variable set gives the same configuration: the defaults agree.
      const bare = loadCompose({});
      expect(bare.compose).toEqual(compose);
      // Every variable has a comment line right above it.
      const lines = readFileSync(ENV_EXAMPLE, 'utf8').split('\n');
      const uncommented = lines.flatMap((l, i) => (/^[A-Z_]+=/.test(l) && !/^#/.test(lines[i - 1] ?? '') && !/^[A-Z_]+=/.test(lines[i - 1] ?? '') ? [l] : []));
      expect(uncommented).toEqual([]);
      // The connection strings point at the compose services, never at the shell's REDIS_URL or MONGO_URL.
      expect(variables.has('REDIS_URL')).toBe(false);
      expect(variables.has('MONGO_URL')).toBe(false);
    });

    test('Redis, MongoDB, the workers, the seeder and the dashboard are set up as the fleet needs', () => {
      const s = compose.services;
      const redis = s.redis!;
      expect(redis.image).toMatch(/^redis:7\.\d+\.\d+$/);
      const redisArgs = list(redis.command).join(' ');
      for (const arg of ['--appendonly yes', '--appendfsync everysec', '--maxmemory-policy noeviction']) expect(redisArgs).toContain(arg);
      expect(redisArgs).toMatch(/--maxmemory \d+[kmg]b/);
      expect(list(redis.healthcheck?.test).join(' ')).toContain('redis-cli ping');
      expect(redis.volumes).toEqual(['redis-data:/data']);
      expect(redis.restart).toBe('unless-stopped');
      expect(s.mongo!.image).toMatch(/^mongo:8\.\d+\.\d+$/);
      expect(s.mongo!.volumes).toEqual(['mongo-data:/data/db', 'mongo-config:/data/configdb']);
      expect(list(s.mongo!.healthcheck?.test)).toEqual(['CMD', 'mongosh', '--quiet', '--eval', "db.adminCommand('ping').ok"]);

      // One image for the fleet, built by exactly one service, from infra/Dockerfile.
      const fleet = Object.entries(s).filter(([, svc]) => svc.image === IMAGE);
      expect(fleet.map(([n]) => n).sort()).toEqual(['dashboard', 'demo-site', 'fetcher', 'parser', 'seeder', 'writer']);
      // The renderer's, the same Dockerfile's variant with Chromium, by the renderer alone.
      const builders = Object.entries(s).filter(([, svc]) => svc.build !== undefined);
      expect(builders.map(([n, svc]) => [n, svc.image, svc.build])).toEqual([
        ['fetcher', IMAGE, { context: '.', dockerfile: 'infra/Dockerfile' }],
        ['renderer', RENDERER_IMAGE, { context: '.', dockerfile: 'infra/Dockerfile', args: { VARIANT: 'renderer' } }],
      ]);
      // Scalable: no fixed container name anywhere, no host port on a worker.
      expect(Object.entries(s).filter(([, svc]) => svc.container_name !== undefined)).toEqual([]);
      for (const [stage, { grace }] of Object.entries(WORKERS)) {
        const w = s[stage]!;
        expect({ stage, ports: w.ports, grace: w.stop_grace_period }).toEqual({ stage, ports: undefined, grace });
        expect(list(w.command).slice(0, 2)).toEqual(['worker', stage]);
        expect(envOf(w)).toMatchObject({ REDIS_URL: 'redis://redis:6379', METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0' });
        expect(list(w.healthcheck?.test).join(' ')).toMatch(/http:\/\/127\.0\.0\.1:9464\/(healthz|readyz)/);
        expect(dependsOn(w)).toMatchObject({ redis: 'service_healthy' });
      }
      expect(envOf(s.writer!).MONGO_URL).toBe('mongodb://mongo:27017/crawlfleet');
      expect(dependsOn(s.writer!)).toEqual({ redis: 'service_healthy', mongo: 'service_healthy' });

      const seeder = s.seeder!;
      expect(seeder.restart).toBe('no');
      expect(list(seeder.command)).toEqual(['seed', '/app/examples/books-compose.json', '--sink', 'mongo', '--crawl-id', 'books-demo']);
      expect(dependsOn(seeder)).toEqual({ redis: 'service_healthy', 'demo-site': 'service_healthy' });

      const dashboard = s.dashboard!;
      expect(list(dashboard.command)).toEqual(['dashboard', '--host', '0.0.0.0', '--port', '3000']);
      // `up --wait` waits for a one-shot service only when another waits for it to complete.
      expect(dependsOn(dashboard)).toEqual({ redis: 'service_healthy', seeder: 'service_completed_successfully' });
      expect(dashboard.ports).toEqual(['127.0.0.1:3000:3000']);
      expect(envOf(dashboard).DASHBOARD_USER).not.toBe('');
      expect(envOf(dashboard).DASHBOARD_PASSWORD).not.toBe('');

      // The demo spider is examples/books.json on the demo site.
      const books = JSON.parse(readFileSync(join(ROOT, 'examples', 'books.json'), 'utf8'));
      const demo = JSON.parse(readFileSync(join(ROOT, 'examples', 'books-compose.json'), 'utf8'));
      expect(demo).toEqual({ ...books, startUrls: ['http://demo-site:8080/index.html'], allowedDomains: ['demo-site:8080'], allowPrivateAddresses: true });
      expect(list(s['demo-site']!.command)).toEqual(['books', '8080']);

      // The renderer: the fetch stage's settings, its own image, more memory; only with --profile render.
      const renderer = s.renderer!;
      expect(list(renderer.command)).toEqual(['worker', 'renderer', '--concurrency', '4']);
      expect(envOf(renderer)).toEqual(envOf(s.fetcher!));
      expect(dependsOn(renderer)).toEqual({ redis: 'service_healthy' });
      expect(list(renderer.healthcheck?.test)).toEqual(list(s.fetcher!.healthcheck?.test));
      expect({ ports: renderer.ports, grace: renderer.stop_grace_period, pull: renderer.pull_policy, init: renderer.init, restart: renderer.restart }).toEqual({
        ports: undefined,
        grace: '60s',
        pull: 'never',
        init: true,
        restart: 'unless-stopped',
      });
      expect({ mem: renderer.mem_limit, shm: renderer.shm_size }).toEqual({ mem: '2g', shm: '1gb' });

      // The monitoring services only with --profile monitoring, the renderer only with --profile render.
      expect(
        Object.entries(s)
          .filter(([, svc]) => svc.profiles)
          .map(([n, svc]) => [n, svc.profiles]),
      ).toEqual([
        ['renderer', ['render']],
        ['prometheus', ['monitoring']],
        ['grafana', ['monitoring']],
      ]);
    });

    test('every image is pinned to a version (Renovate proposes the updates); the fleet image is never pulled', () => {
      const images = Object.entries(compose.services).map(([name, svc]): [string, string] => [name, svc.image ?? '']);
      const unpinned = images.filter(([, image]) => image !== IMAGE && image !== RENDERER_IMAGE && !/:v?\d+\.\d+\.\d+(-[\w.-]+)?$/.test(image));
      expect(unpinned).toEqual([]);
      const from = readFileSync(DOCKERFILE, 'utf8').match(/^ARG NODE_IMAGE=(.+)$/m)?.[1];
      expect(from).toMatch(/^node:24\.\d+\.\d+-bookworm-slim$/);
      for (const [name, svc] of Object.entries(compose.services)) if (svc.image === IMAGE || svc.image === RENDERER_IMAGE) expect({ name, pull: svc.pull_policy }).toEqual({ name, pull: 'never' });
      const renovate = JSON.parse(readFileSync(join(ROOT, 'renovate.json'), 'utf8'));
      expect(renovate.enabledManagers).toEqual(expect.arrayContaining(['docker-compose', 'dockerfile', 'kustomize', 'npm']));
    });

    test('the same settings as the Kubernetes manifests: commands and drain times', () => {
      for (const stage of ['fetcher', 'parser', 'writer', 'renderer', 'dashboard']) {
        const docs = parseAllDocuments(readFileSync(join(ROOT, 'infra', 'k8s', 'base', `${stage}.yaml`), 'utf8')).map((d) => d.toJS());
        const deployment = docs.find((d) => d?.kind === 'Deployment');
        const pod = deployment.spec.template.spec;
        const service = compose.services[stage]!;
        expect({ stage, args: pod.containers[0].args, grace: pod.terminationGracePeriodSeconds }).toEqual({ stage, args: list(service.command), grace: seconds(service.stop_grace_period, 10) });
      }
    });
  });

  describe('the image (infra/Dockerfile, .dockerignore)', () => {
    test('multi-stage npm ci, build and prune; non-root; /data owned by node, no VOLUME, ./data a link to it; a HEALTHCHECK', () => {
      const stages = dockerfileStages();
      expect(stages.length).toBeGreaterThanOrEqual(2);
      const build = stages[0]!.join('\n');
      for (const step of ['npm ci', 'npm run build', 'npm prune --omit=dev']) expect(build).toContain(step);
      const final = stages.at(-1)!.join('\n');
      expect(final).toMatch(/^USER node$/m);
      // A VOLUME gave every replica and every `docker compose run` an anonymous volume that outlived it.
      expect(final).not.toMatch(/^VOLUME/m);
      // The manifests are copied and installed before the sources, so a source edit reuses the install.
      const installAt = build.indexOf('npm ci');
      const manifests = [...build.slice(0, installAt).matchAll(/^COPY (\S+\/package\.json) /gm)].map((m) => m[1]);
      const workspaces = ['packages', 'services'].flatMap((d) => readdirSync(join(ROOT, d)).map((w) => `${d}/${w}/package.json`)).filter((f) => existsSync(join(ROOT, f)));
      expect(manifests.sort()).toEqual(workspaces.sort());
      expect(build.indexOf('COPY packages ./packages')).toBeGreaterThan(installAt);
      expect(build).toMatch(/RUN --mount=type=cache,target=\/root\/\.npm npm ci/);
      expect(build).toContain('rm -rf node_modules/typescript');
      expect(final).toMatch(/chown node:node \/data/);
      expect(final).toMatch(/ln -s \/data \/app\/data/);
      expect(final).toMatch(/^WORKDIR \/app$/m);
      expect(final).toMatch(/^HEALTHCHECK .*CMD \[/m);
      expect(final).toMatch(/^ENTRYPOINT \["crawlfleet"\]$/m);
    });

    test("the renderer's variant (VARIANT=renderer): the runtime stage on a base with Debian's Chromium; the default stays Node alone", () => {
      const stages = dockerfileStages();
      const text = readFileSync(DOCKERFILE, 'utf8');
      /** A Dockerfile argument as the file spells it: $ and the name in braces. */
      const arg = (name: string) => ['$', `{${name}}`].join('');
      expect(text).toMatch(/^ARG VARIANT=slim$/m);
      // the last stage, what a build without --build-arg gives, is the runtime on the base VARIANT names
      expect(stages.at(-1)![0]).toBe(`FROM base-${arg('VARIANT')}`);
      const base = (name: string) => stages.find((st) => new RegExp(`^FROM \\$\\{NODE_IMAGE\\} AS ${name}$`).test(st[0]!));
      // slim: Node's image as it is, not a layer more
      expect(base('base-slim')).toEqual([`FROM ${arg('NODE_IMAGE')} AS base-slim`]);
      const renderer = base('base-renderer')!.join('\n');
      expect(renderer).toMatch(/apt-get install -y --no-install-recommends chromium fonts-liberation/);
      expect(renderer).toMatch(/rm -rf \/var\/lib\/apt\/lists\/\*/);
      expect(renderer).toMatch(/^ENV CHROMIUM_PATH=\/usr\/bin\/chromium$/m);
      // Chromium is installed by root before the runtime stage, which runs as node
      expect(renderer).not.toMatch(/^USER /m);
      // Chromium nowhere else: not in the build stage, not in the runtime stage
      for (const st of stages.filter((st) => st !== base('base-renderer'))) expect(st.join('\n')).not.toMatch(/chromium/i);
      // the compose file builds the variant it names
      const build = compose.services.renderer!.build as { args?: Record<string, string> };
      expect(base(`base-${build.args!.VARIANT}`)).toBeDefined();
    });

    test('every /app path the compose file names is in the image, from a file the build context keeps', () => {
      const files = imageFiles();
      const named = new Set<string>();
      for (const [, service] of Object.entries(compose.services)) {
        for (const s of [...list(service.entrypoint), ...list(service.command)]) for (const m of s.matchAll(/\/app\/[\w./-]+/g)) named.add(m[0]);
      }
      expect([...named].sort()).toEqual(['/app/demo/serve.mjs', '/app/examples/books-compose.json']);
      // The demo site: serve.mjs, what it imports (transitively), and the archives static-site.mjs finds
      // next to itself; only the books one is opened by the demo (top-sites-html.tar.gz stays out).
      const needed = new Set(named);
      const queue = [...named].filter((p) => p.endsWith('.mjs'));
      while (queue.length > 0) {
        const inImage = queue.pop()!;
        const source = files.get(inImage);
        if (!source) continue;
        const text = readFileSync(join(ROOT, source), 'utf8');
        for (const m of text.matchAll(/from '(\.\/[^']+)'|new URL\('(\.\/[^']+)', import\.meta\.url\)/g)) {
          const dep = join(dirname(inImage), m[1] ?? m[2]!);
          if (!needed.has(dep)) {
            needed.add(dep);
            if (dep.endsWith('.mjs')) queue.push(dep);
          }
        }
      }
      const missing = [...needed].filter((p) => !files.has(p) && !/top-sites/.test(p));
      expect(missing).toEqual([]);
      for (const p of needed) {
        const source = files.get(p);
        if (source) expect({ p, source, ignored: dockerIgnored(source) }).toEqual({ p, source, ignored: false });
      }
      // The build context keeps what the build stage copies, and leaves out the host's build output.
      for (const kept of ['package.json', 'package-lock.json', 'turbo.json', 'tsconfig.base.json', 'packages/core/src/env.ts', 'bin/crawlfleet', 'examples/books-compose.json']) {
        expect({ kept, ignored: dockerIgnored(kept) }).toEqual({ kept, ignored: false });
      }
      for (const dropped of [
        'node_modules/bullmq/package.json',
        'packages/core/dist/index.js',
        'packages/core/node_modules/x',
        'packages/core/tsconfig.tsbuildinfo',
        '.git/HEAD',
        'data/books/items.jsonl',
        'test-artifacts/x.png',
        '.turbo/cache',
        'test/e2e/books.test.ts',
        'test/fixtures/data/top-sites-html.tar.gz',
      ]) {
        expect({ dropped, ignored: dockerIgnored(dropped) }).toEqual({ dropped, ignored: true });
      }
    });
  });

  describe('the monitoring profile (infra/monitoring)', () => {
    const prometheusConfig = parseYaml(readFileSync(join(MONITORING, 'prometheus.yml'), 'utf8')) as {
      scrape_configs: { job_name: string; dns_sd_configs?: { names: string[]; type: string; port: number }[]; static_configs?: { targets: string[] }[]; basic_auth?: Record<string, string> }[];
    };
    const dashboard = JSON.parse(readFileSync(GRAFANA_DASHBOARD, 'utf8')) as {
      uid: string;
      schemaVersion: number;
      templating: { list: { name: string; type?: string; query?: unknown; datasource?: { uid: string } }[] };
      panels: {
        id: number;
        type: string;
        title: string;
        gridPos: { x: number; y: number; w: number; h: number };
        datasource?: { type: string; uid: string };
        targets?: { refId: string; expr: string; datasource?: { uid: string } }[];
      }[];
    };
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));

    test('Prometheus finds every worker replica by DNS and scrapes the dashboard with its credentials; promtool accepts the config', () => {
      const prometheus = compose.services.prometheus!;
      const workers = prometheusConfig.scrape_configs.find((j) => j.dns_sd_configs);
      expect(workers!.dns_sd_configs).toEqual([{ names: ['fetcher', 'parser', 'writer', 'renderer'], type: 'A', port: 9464, refresh_interval: '15s' }]);
      for (const name of workers!.dns_sd_configs![0]!.names) expect(envOf(compose.services[name]!).METRICS_PORT).toBe('9464');
      const dash = prometheusConfig.scrape_configs.find((j) => j.basic_auth)!;
      expect(dash.static_configs).toEqual([{ targets: ['dashboard:3000'] }]);
      // The files it reads are the ones the prometheus service writes from DASHBOARD_USER/PASSWORD before it starts.
      const script = list(prometheus.entrypoint).join(' ');
      expect(script).toContain(`"$DASHBOARD_USER" > ${dash.basic_auth!.username_file}`);
      expect(script).toContain(`"$DASHBOARD_PASSWORD" > ${dash.basic_auth!.password_file}`);
      expect(envOf(prometheus)).toEqual({ DASHBOARD_USER: envOf(compose.services.dashboard!).DASHBOARD_USER, DASHBOARD_PASSWORD: envOf(compose.services.dashboard!).DASHBOARD_PASSWORD });
      // The tmpfs belongs to nobody, the user Prometheus runs as (root's, it could not write there).
      expect(list(prometheus.tmpfs)).toContain(`${dirname(dash.basic_auth!.password_file!)}:uid=65534,gid=65534,mode=0700`);
      expect(prometheus.volumes).toContain('./infra/monitoring/prometheus.yml:/etc/prometheus/prometheus.yml:ro');
      // promtool (Debian's Prometheus 2.42) checks the rest. It predates basic_auth.username_file
      // (Prometheus 3.x, which the compose file runs, has it): the copy it checks names the user inline.
      const dir = tempDir('promtool');
      writeFileSync(join(dir, 'password'), 'x');
      const copy = readFileSync(join(MONITORING, 'prometheus.yml'), 'utf8')
        .replace(/username_file: .*/, 'username: admin')
        .replace(/password_file: .*/, `password_file: ${join(dir, 'password')}`);
      writeFileSync(join(dir, 'prometheus.yml'), copy);
      const checked = spawnSync('promtool', ['check', 'config', join(dir, 'prometheus.yml')], { encoding: 'utf8' });
      expect({ status: checked.status, out: checked.stdout + checked.stderr }).toMatchObject({ status: 0 });
    });

    test('Grafana: the datasource and the dashboard provider point at what compose mounts; the dashboard is well-formed and every query parses', () => {
      const grafana = compose.services.grafana!;
      const datasources = parseYaml(readFileSync(join(MONITORING, 'grafana', 'provisioning', 'datasources', 'prometheus.yml'), 'utf8')) as {
        datasources: { uid: string; type: string; url: string }[];
      };
      const providers = parseYaml(readFileSync(join(MONITORING, 'grafana', 'provisioning', 'dashboards', 'crawlfleet.yml'), 'utf8')) as { providers: { type: string; options: { path: string } }[] };
      expect(datasources.datasources).toHaveLength(1);
      const ds = datasources.datasources[0]!;
      expect(ds).toMatchObject({ type: 'prometheus', url: 'http://prometheus:9090' });
      expect(grafana.volumes).toEqual(
        expect.arrayContaining(['./infra/monitoring/grafana/provisioning:/etc/grafana/provisioning:ro', `./infra/monitoring/grafana/dashboards:${providers.providers[0]!.options.path}:ro`]),
      );
      expect(envOf(grafana).GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH).toBe(`${providers.providers[0]!.options.path}/crawlfleet.json`);

      expect(dashboard.schemaVersion).toBe(39);
      expect(dashboard.uid).toBe('crawlfleet');
      const ids = dashboard.panels.map((p) => p.id);
      expect(new Set(ids).size).toBe(ids.length);
      // Panels within the 24 columns, none overlapping another.
      const cells = new Set<string>();
      for (const p of dashboard.panels) {
        expect({ title: p.title, fits: p.gridPos.x >= 0 && p.gridPos.x + p.gridPos.w <= 24 }).toEqual({ title: p.title, fits: true });
        for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x++) {
          for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y++) {
            expect({ title: p.title, cell: `${x},${y}`, taken: cells.has(`${x},${y}`) }).toEqual({ title: p.title, cell: `${x},${y}`, taken: false });
            cells.add(`${x},${y}`);
          }
        }
        if (p.type === 'row') continue;
        // Every query goes to the datasource variable's Prometheus (the provisioned one by default),
        // and filters by the job and namespace variables: the dashboard works outside compose too.
        expect({ title: p.title, ds: p.datasource?.uid }).toEqual({ title: p.title, ds: DATASOURCE_VARIABLE });
        expect((p.targets ?? []).length).toBeGreaterThan(0);
        for (const t of p.targets!) {
          expect({ title: p.title, ok: /^[A-Z]$/.test(t.refId) && t.expr.length > 0 && t.datasource?.uid === DATASOURCE_VARIABLE }).toEqual({ title: p.title, ok: true });
          const selectors = t.expr.match(/\{[^}]*\}/g) ?? [];
          expect({ expr: t.expr, filtered: selectors.length > 0 && selectors.every((m) => m.includes('job=~"$job"') && m.includes('namespace=~"$namespace"')) }).toEqual({
            expr: t.expr,
            filtered: true,
          });
        }
      }
      const [dsVariable, ...queryVariables] = dashboard.templating.list;
      expect(dsVariable).toMatchObject({ type: 'datasource', name: 'datasource', query: 'prometheus' });
      expect(queryVariables.map((v) => v.name)).toEqual(['job', 'namespace', 'crawl']);
      for (const v of queryVariables) expect(v.datasource?.uid).toBe(DATASOURCE_VARIABLE);
      expect(ds.uid).toBe('crawlfleet-prometheus');

      // Only the fleet's metric names; each of the required ones on some panel.
      const used = new Set(exprs.flatMap((e) => [...e.matchAll(/crawlfleet_[a-z0-9_]+/g)].map((m) => m[0])));
      const base = (name: string) => name.replace(/_(bucket|sum|count)$/, '');
      const unknown = [...used].filter((n) => !KNOWN_METRICS.includes(n) && !KNOWN_METRICS.includes(base(n)) && !n.startsWith('process_') && !n.startsWith('nodejs_'));
      expect(unknown).toEqual([]);
      expect(REQUIRED_IN_DASHBOARD.filter((n) => ![...used].some((u) => u === n || base(u) === n))).toEqual([]);
      expect(exprs.filter((e) => e.includes('histogram_quantile')).every((e) => /_bucket(\{[^}]*\})?\[/.test(e) && /by \(le\)/.test(e))).toBe(true);

      // PromQL: promtool parses each expression as a recording rule (Grafana's variables substituted).
      const dir = tempDir('promql');
      const rules = {
        groups: [
          {
            name: 'dashboard',
            rules: exprs.map((expr, i) => ({
              record: `dashboard:expr_${i}`,
              expr: expr.replaceAll('$__rate_interval', '1m').replaceAll('$crawl', '.*').replaceAll('$job', '.*').replaceAll('$namespace', '.*'),
            })),
          },
        ],
      };
      writeFileSync(join(dir, 'rules.yml'), JSON.stringify(rules));
      const checked = spawnSync('promtool', ['check', 'rules', join(dir, 'rules.yml')], { encoding: 'utf8' });
      expect({ status: checked.status, out: checked.stdout + checked.stderr }).toMatchObject({ status: 0 });
    });
  });

  describe('the wiring, run as local processes (docker compose up --scale fetcher=3)', () => {
    const dir = tempDir('compose-run');
    const procs: Proc[] = [];
    let mongo: MongoServer | undefined;
    let redis: Proc | undefined;

    afterAll(async () => {
      for (const p of [...procs].reverse()) if (p.child.exitCode === null) p.child.kill('SIGTERM');
      const killer = setTimeout(() => {
        for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
      }, 20_000);
      await Promise.all(procs.map((p) => p.exited));
      clearTimeout(killer);
      if (mongo) {
        const client = await MongoClient.connect(mongo.url).catch(() => undefined);
        await client
          ?.db()
          .dropDatabase()
          .catch(() => undefined);
        await client?.close();
        await mongo.stop();
      }
      if (redis && redis.child.exitCode === null) {
        redis.child.kill('SIGTERM');
        await redis.exited;
      }
      rmSync(dir, { recursive: true, force: true });
    });

    test('each service runs its own command and environment; every healthcheck passes; the demo crawl ends with exactly the expected items in MongoDB, shown by the dashboard', async () => {
      const started = Date.now();
      const timings: Record<string, number> = {};
      const mark = (what: string) => {
        timings[what] = Math.round((Date.now() - started) / 100) / 10;
        process.stdout.write(`compose wiring: ${what} after ${timings[what]} s\n`);
      };
      const services = Object.fromEntries(defaultServices(compose));
      expect(Object.keys(services).sort()).toEqual(['dashboard', 'demo-site', 'fetcher', 'mongo', 'parser', 'redis', 'seeder', 'writer']);

      // The stand-ins for the two database images, on loopback.
      const redisPort = await freePort();
      mkdirSync(join(dir, 'redis'));
      const redisArgs = list(services.redis!.command);
      expect(redisArgs[0]).toBe('redis-server');
      redis = startProc('redis', [...redisArgs, '--port', String(redisPort), '--bind', '127.0.0.1', '--dir', join(dir, 'redis')], { PATH });
      await waitForPort(redisPort, 10_000, 'redis-server');
      const redisInfo = spawnSync('redis-cli', ['-p', String(redisPort), 'config', 'get', 'maxmemory-policy'], { encoding: 'utf8' });
      expect(redisInfo.stdout.split('\n')[1]).toBe('noeviction');
      mongo = await startMongo(`compose_${process.pid}_${Date.now().toString(36)}`);
      mark('redis and FerretDB up');

      const demoPort = await freePort();
      // The spider the seeder reads, with the demo site's port here: the host name stays demo-site,
      // which the fetchers resolve to 127.0.0.1 through HOST_RESOLVE.
      const spiderCopy = join(dir, 'books-compose.json');
      writeFileSync(spiderCopy, readFileSync(join(ROOT, 'examples', 'books-compose.json'), 'utf8').replaceAll('demo-site:8080', `demo-site:${demoPort}`));
      const imageEntrypoint = JSON.parse(/^ENTRYPOINT (\[.*\])$/m.exec(dockerfileStages().at(-1)!.join('\n'))![1]!) as string[];
      expect(imageEntrypoint).toEqual(['crawlfleet']);

      /** A container's view of the world, translated to this machine. `ports`: its own ports (in the container) to local ones. */
      const translate = (value: string, ports: Map<number, number>): string => {
        let s = value
          .replaceAll('redis://redis:6379', `redis://127.0.0.1:${redisPort}`)
          .replace(/mongodb:\/\/mongo:27017\/[\w-]*/g, mongo!.url)
          .replaceAll('demo-site:8080', `demo-site:${demoPort}`)
          .replaceAll('0.0.0.0', '127.0.0.1')
          .replaceAll('/app/examples/books-compose.json', spiderCopy)
          .replaceAll('/app/demo/', `${ROOT}/test/fixtures/`);
        for (const [inside, here] of ports) {
          if (s === String(inside)) s = String(here);
          s = s.replaceAll(`127.0.0.1:${inside}/`, `127.0.0.1:${here}/`);
        }
        if (/redis:6379|mongo:27017|0\.0\.0\.0|\/app\//.test(s)) throw new Error(`cannot translate ${value} for a local process`);
        return s;
      };
      const argvOf = (service: Service, ports: Map<number, number>): string[] => {
        const argv = [...(service.entrypoint !== undefined ? list(service.entrypoint) : service.image === IMAGE ? imageEntrypoint : []), ...list(service.command)];
        return argv.map((a, i) => (i === 0 && a === 'crawlfleet' ? CLI : translate(a, ports)));
      };
      const envFor = (service: Service, ports: Map<number, number>, extra: Env = {}): Env => ({
        PATH,
        HOME: home,
        ...Object.fromEntries(Object.entries(envOf(service)).map(([k, v]) => [k, translate(v, ports)])),
        ...extra,
      });

      /** The service's healthcheck as a local command: exit code and output. */
      const healthcheck = async (name: string, ports: Map<number, number>, env: Env): Promise<{ code: number | null; output: string; stdout?: string }> => {
        const test = list(services[name]!.healthcheck?.test);
        if (name === 'mongo') {
          // mongosh is not in Debian; when it is on PATH (or in node_modules/.bin) the real check runs.
          const mongosh = [join(ROOT, 'node_modules', '.bin', 'mongosh'), ...PATH.split(delimiter).map((d) => join(d, 'mongosh'))].find((p) => existsSync(p));
          if (mongosh) return runToEnd('mongo healthcheck', [mongosh, mongo!.url, ...test.slice(2)], env, 30_000);
          // Without it, the same command through the driver: db.adminCommand('ping').ok on the server the writer uses.
          const client = await MongoClient.connect(mongo!.url, { serverSelectionTimeoutMS: 5000 });
          try {
            const ok = (await client.db().admin().command({ ping: 1 })).ok;
            return { code: ok === 1 ? 0 : 1, output: `driver ping ok=${ok} (mongosh not installed)` };
          } finally {
            await client.close();
          }
        }
        if (test[0] === 'CMD-SHELL') {
          const script = name === 'redis' ? test[1]!.replaceAll('redis-cli', `redis-cli -p ${redisPort}`) : translate(test[1]!, ports);
          return runToEnd(`${name} healthcheck`, ['/bin/sh', '-c', script], env, 30_000);
        }
        expect(test[0]).toBe('CMD');
        return runToEnd(
          `${name} healthcheck`,
          test.slice(1).map((a) => translate(a, ports)),
          env,
          30_000,
        );
      };
      /** As Docker does: the check, every second here, until it passes or its retries are used up after start_period. */
      const healthy = async (name: string, ports: Map<number, number>, env: Env, proc?: Proc) => {
        const hc = services[name]!.healthcheck!;
        const deadline = Date.now() + (seconds(hc.start_period, 0) + (hc.retries ?? 3) * Math.max(seconds(hc.interval, 30), 1)) * 1000;
        for (;;) {
          const result = await healthcheck(name, ports, env);
          if (result.code === 0) return result;
          if (Date.now() > deadline || (proc && proc.child.exitCode !== null)) {
            throw new Error(`${name}: healthcheck failed (${result.code}): ${result.output}\n--- ${name}'s output:\n${proc?.output() ?? ''}`);
          }
          await new Promise((r) => setTimeout(r, 1000));
        }
      };

      // Start the services in depends_on order, each after its dependencies are started or healthy,
      // each replica with its own loopback ports for the container ports it uses.
      const containerPorts: Record<string, number[]> = { 'demo-site': [8080], fetcher: [9464], parser: [9464], writer: [9464], dashboard: [3000] };
      const instances = new Map<string, { proc: Proc; ports: Map<number, number>; env: Env }[]>();
      const healthChecked: string[] = [];
      const ready = new Set<string>(['redis', 'mongo']);
      instances.set('redis', [{ proc: redis, ports: new Map([[6379, redisPort]]), env: { PATH } }]);
      // Long-running services first (Compose starts everything at once; only depends_on orders them),
      // then the one-shot seeder, so that the local Prometheus below sees the whole crawl.
      const oneShots = Object.keys(services).filter((n) => services[n]!.restart === 'no');
      const pending = Object.keys(services).filter((n) => !ready.has(n) && !oneShots.includes(n));
      // A service may wait for a one-shot to complete (the dashboard does, for `up --wait`); here it
      // starts before it instead, which changes nothing this test looks at.
      const afterOneShot = (d: string, condition: string) => oneShots.includes(d) && condition === 'service_completed_successfully';
      for (const n of Object.keys(services)) {
        const onOneShot = Object.entries(dependsOn(services[n]!)).filter(([d]) => oneShots.includes(d));
        expect({ n, onOneShot: onOneShot.filter(([d, c]) => !afterOneShot(d, c)) }).toEqual({ n, onOneShot: [] });
      }
      // redis and mongo are up: their own healthchecks.
      for (const name of ['redis', 'mongo']) {
        const result = await healthy(name, new Map(), { PATH });
        healthChecked.push(`${name}: ${result.output.trim() || 'exit 0'}`);
      }
      /** Before a service starts, the conditions of its depends_on: a healthy dependency's check passes now. */
      const awaitDependencies = async (service: Service) => {
        for (const [dep, condition] of Object.entries(dependsOn(service))) {
          if (afterOneShot(dep, condition)) continue;
          if (!ready.has(dep)) throw new Error(`${dep} is not started`);
          if (condition === 'service_healthy' && !['redis', 'mongo'].includes(dep)) {
            for (const inst of instances.get(dep)!) await healthy(dep, inst.ports, inst.env, inst.proc);
          }
        }
      };
      while (pending.length > 0) {
        const next = pending.find((n) => Object.entries(dependsOn(services[n]!)).every(([d, c]) => ready.has(d) || afterOneShot(d, c)));
        if (!next) throw new Error(`depends_on cannot be satisfied: ${pending.join(', ')}`);
        pending.splice(pending.indexOf(next), 1);
        const service = services[next]!;
        await awaitDependencies(service);
        const replicas = SCALE[next] ?? 1;
        const started_: { proc: Proc; ports: Map<number, number>; env: Env }[] = [];
        for (let r = 0; r < replicas; r++) {
          const ports = new Map<number, number>();
          for (const p of containerPorts[next] ?? []) ports.set(p, next === 'demo-site' && p === 8080 ? demoPort : await freePort());
          const extra: Env = next === 'fetcher' ? { HOST_RESOLVE: 'demo-site:127.0.0.1' } : {};
          const env = envFor(service, ports, extra);
          const proc = startProc(replicas > 1 ? `${next}-${r + 1}` : next, argvOf(service, ports), env);
          procs.push(proc);
          started_.push({ proc, ports, env });
        }
        instances.set(next, started_);
        ready.add(next);
      }
      mark('services started');

      // The monitoring profile's scrape jobs, on Debian's Prometheus: the same job names and basic
      // auth, the replicas as static targets (Docker's DNS is not here), scraped every second.
      const metricsTargets = (stage: string) => instances.get(stage)!.map((i) => `127.0.0.1:${i.ports.get(9464)}`);
      const dashboardInstance = instances.get('dashboard')![0]!;
      const promDir = join(dir, 'prometheus');
      mkdirSync(promDir);
      const promConfig = parseYaml(readFileSync(join(MONITORING, 'prometheus.yml'), 'utf8')) as { scrape_configs: Record<string, unknown>[] };
      writeFileSync(join(promDir, 'password'), dashboardInstance.env.DASHBOARD_PASSWORD!);
      const promJobs = promConfig.scrape_configs
        .map((job) => {
          if (job.dns_sd_configs) {
            const { dns_sd_configs: sd, relabel_configs: _relabel, ...rest } = job as { dns_sd_configs: { names: string[] }[]; relabel_configs: unknown };
            // the renderer runs with --profile render only, not here
            return { ...rest, static_configs: sd[0]!.names.filter((stage) => instances.has(stage)).map((stage) => ({ targets: metricsTargets(stage), labels: { stage } })) };
          }
          if (job.basic_auth)
            return {
              ...job,
              basic_auth: { username: dashboardInstance.env.DASHBOARD_USER, password_file: join(promDir, 'password') },
              static_configs: [{ targets: [`127.0.0.1:${dashboardInstance.ports.get(3000)}`] }],
            };
          return null;
        })
        .filter((j) => j !== null);
      const promPort = await freePort();
      writeFileSync(join(promDir, 'prometheus.yml'), JSON.stringify({ global: { scrape_interval: '1s', evaluation_interval: '1s' }, scrape_configs: promJobs }));
      procs.push(
        startProc(
          'prometheus',
          ['prometheus', `--config.file=${join(promDir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(promDir, 'tsdb')}`, `--web.listen-address=127.0.0.1:${promPort}`, '--log.level=warn'],
          { PATH, HOME: home },
        ),
      );
      const promUrl = `http://127.0.0.1:${promPort}`;
      const promQuery = async (query: string) =>
        (await (await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(query)}`)).json()) as {
          status: string;
          data: { result: { metric: Record<string, string>; value: [number, string] }[] };
        };
      await waitForPort(promPort, 20_000, 'prometheus');
      const upByStage = async () => Object.fromEntries((await promQuery('sum by (stage) (up{job="crawlfleet-workers"})')).data.result.map((r) => [r.metric.stage, Number(r.value[1])]));
      const deadline = Date.now() + 30_000;
      while (JSON.stringify(await upByStage().catch(() => ({}))) !== JSON.stringify({ fetcher: 3, parser: 1, writer: 1 }) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
      expect(await upByStage()).toEqual({ fetcher: 3, parser: 1, writer: 1 });
      mark('prometheus scraping');

      let seederResult: { code: number | null; output: string; stdout: string } | undefined;
      for (const next of oneShots) {
        const service = services[next]!;
        await awaitDependencies(service);
        // The one-shot seeder: it runs to its end.
        const ports = new Map<number, number>();
        seederResult = await runToEnd(next, argvOf(service, ports), envFor(service, ports), 60_000);
        mark(`${next} done`);
        ready.add(next);
      }
      expect(seederResult).toBeDefined();
      expect({ code: seederResult!.code, output: seederResult!.code === 0 ? '' : seederResult!.output }).toEqual({ code: 0, output: '' });
      expect(seederResult!.stdout.trim().split('\n').pop()).toBe('books-demo');
      expect(instances.get('fetcher')).toHaveLength(3);

      // Every running service's own healthcheck passes (the demo site's already did, before the seeder).
      for (const [name, list__] of instances) {
        if (name === 'redis') continue;
        for (const inst of list__) {
          const result = await healthy(name, inst.ports, inst.env, inst.proc);
          healthChecked.push(`${inst.proc.name}: ${result.output.trim() || 'exit 0'}`);
        }
      }
      mark('healthchecks passed');

      // The image's own HEALTHCHECK (a worker's /healthz when METRICS_PORT is set, else nothing to check).
      const imageCheck = JSON.parse(/^HEALTHCHECK .*?CMD (\[.*\])$/m.exec(dockerfileStages().at(-1)!.join('\n'))![1]!) as string[];
      const fetcher1 = instances.get('fetcher')![0]!;
      const closed = await freePort();
      expect((await runToEnd('image healthcheck', imageCheck, { PATH, METRICS_PORT: String(fetcher1.ports.get(9464)), METRICS_HOST: '0.0.0.0' }, 10_000)).code).toBe(0);
      expect((await runToEnd('image healthcheck', imageCheck, { PATH }, 10_000)).code).toBe(0);
      expect((await runToEnd('image healthcheck', imageCheck, { PATH, METRICS_PORT: String(closed) }, 10_000)).code).toBe(1);

      // Without its credentials, the dashboard's command refuses to bind 0.0.0.0 (exit 2): why the
      // compose file always sets them. It refuses before it listens.
      const dashboardService = services.dashboard!;
      const { DASHBOARD_USER: _u, DASHBOARD_PASSWORD: _p, ...noCredentials } = envFor(dashboardService, new Map());
      const open = await runToEnd('dashboard without credentials', [CLI, ...list(dashboardService.command)], noCredentials, 30_000);
      expect(open.code).toBe(2);

      // The crawl runs to its end: `crawlfleet wait`, with the seeder's environment.
      const seederEnv = envFor(services.seeder!, new Map());
      const waited = await runToEnd('wait', [CLI, 'wait', '--crawl-id', 'books-demo', '--timeout', '120'], seederEnv, 130_000);
      mark('crawl done');
      if (waited.code !== 0) {
        throw new Error(`wait exited ${waited.code}: ${waited.output}\n${procs.map((p) => `--- ${p.name}\n${p.output().slice(-3000)}`).join('\n')}`);
      }
      const status = JSON.parse((await runToEnd('status', [CLI, 'status', '--crawl-id', 'books-demo', '--json'], seederEnv, 30_000)).stdout.trim().split('\n').pop()!);
      expect(status.state).toBe('done');
      expect(status.counters).toMatchObject({ items: 1180, written: 1180, invalid: 0 });

      // Exactly the expected items in MongoDB, compared field by field with the pages themselves.
      const { listings: truthListings, details: truthBooks } = booksTruth(unpack(BOOKS_ARCHIVE), `http://demo-site:${demoPort}`);
      const truth = { listings: truthListings, books: truthBooks };
      expect(truth.listings).toHaveLength(980);
      expect(truth.books).toHaveLength(200);
      const client = await MongoClient.connect(mongo.url);
      try {
        const listings = await client.db().collection('listing').find({}).toArray();
        const books = await client.db().collection('book').find({}).toArray();
        const listingFields = ['type', 'link', 'title', 'price', 'rating'];
        const bookFields = ['type', 'url', 'title', 'price', 'upc', 'availability', 'rating'];
        expect(comparable(listings, listingFields)).toEqual(comparable(truth.listings, listingFields));
        expect(comparable(books, bookFields)).toEqual(comparable(truth.books, bookFields));
        expect(listings.every((d) => d._id === d.link && d.crawlId === 'books-demo')).toBe(true);
        expect(books.every((d) => d._id === d.upc && d.crawlId === 'books-demo')).toBe(true);
      } finally {
        await client.close();
      }
      mark('items compared');

      // The dashboard shows it: Bull Board and /api/crawls behind the compose file's credentials.
      const dashboard = instances.get('dashboard')![0]!;
      const dashboardUrl = `http://127.0.0.1:${dashboard.ports.get(3000)}`;
      const { DASHBOARD_USER: user, DASHBOARD_PASSWORD: password } = dashboard.env;
      const auth = { authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` };
      expect((await fetch(`${dashboardUrl}/`)).status).toBe(401);
      const board = await fetch(`${dashboardUrl}/`, { headers: auth });
      expect(board.status).toBe(200);
      const crawls = (await (await fetch(`${dashboardUrl}/api/crawls`, { headers: auth })).json()) as { crawlId: string; state: string; counters: { written: number } }[];
      expect(crawls.find((c) => c.crawlId === 'books-demo')).toMatchObject({ state: 'done', counters: { written: 1180 } });
      const queues = (await (await fetch(`${dashboardUrl}/api/queues`, { headers: auth })).json()) as { queues: { name: string }[] };
      expect(queues.queues.map((q) => q.name).sort()).toEqual(['fetch', 'parse', 'render', 'write']);

      // Every scaled fetcher took part; their totals add up to the crawl's counter. Every metric the
      // Grafana dashboard queries is exported by some worker or the dashboard.
      const scrape = async (url: string, headers: Record<string, string> = {}) => (await fetch(url, { headers })).text();
      const metricTexts: string[] = [];
      let fetchedByWorkers = 0;
      for (const inst of instances.get('fetcher')!) {
        const text = await scrape(`http://127.0.0.1:${inst.ports.get(9464)}/metrics`);
        metricTexts.push(text);
        const fetched = Number(/^crawlfleet_pages_fetched_total(?:\{[^}]*\})? (\d+)$/m.exec(text)?.[1] ?? 0);
        expect({ fetcher: inst.proc.name, fetchedSome: fetched > 0 }).toEqual({ fetcher: inst.proc.name, fetchedSome: true });
        fetchedByWorkers += fetched;
      }
      expect(fetchedByWorkers).toBe(status.counters.fetched);
      for (const name of ['parser', 'writer']) metricTexts.push(await scrape(`http://127.0.0.1:${instances.get(name)![0]!.ports.get(9464)}/metrics`));
      const dashboardMetrics = await scrape(`${dashboardUrl}/metrics`, auth);
      metricTexts.push(dashboardMetrics);
      expect(dashboardMetrics).toMatch(/^crawlfleet_crawl_written_total\{crawl="books-demo",spider="books"[^}]*\} 1180$/m);
      const exported = new Set(metricTexts.flatMap((t) => [...t.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!)));
      const dashboardJson = JSON.parse(readFileSync(GRAFANA_DASHBOARD, 'utf8')) as { panels: { targets?: { expr: string }[] }[] };
      const queried = new Set(dashboardJson.panels.flatMap((p) => (p.targets ?? []).flatMap((t) => [...t.expr.matchAll(/crawlfleet_[a-z0-9_]+/g)].map((m) => m[0]))));
      // A name ending in _ is a family selected by a regular expression (crawlfleet_crawl_.+_total).
      const isExported = (n: string) => exported.has(n) || exported.has(n.replace(/_(bucket|sum|count)$/, '')) || (n.endsWith('_') && [...exported].some((e) => e.startsWith(n)));
      const notExported = [...queried].filter((n) => !isExported(n));
      expect(notExported).toEqual([]);

      // Every query of the Grafana dashboard returns series from this Prometheus (the proxy panels
      // excepted: no PROXY_LIST here), once it has scraped the end of the crawl.
      const promDeadline = Date.now() + 30_000;
      const scrapedEnd = async () => Number((await promQuery('max(crawlfleet_crawl_written_total{crawl="books-demo"})')).data.result[0]?.value[1] ?? -1) === 1180;
      while (!(await scrapedEnd()) && Date.now() < promDeadline) await new Promise((r) => setTimeout(r, 250));
      expect(await scrapedEnd()).toBe(true);
      await new Promise((r) => setTimeout(r, 2000));
      const empty: string[] = [];
      const allExprs = dashboardJson.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
      for (const expr of allExprs) {
        if (expr.includes('crawlfleet_proxy_')) continue;
        const res = await promQuery(expr.replaceAll('$__rate_interval', '5m').replaceAll('$crawl', '.*').replaceAll('$job', '.*').replaceAll('$namespace', '.*'));
        expect({ expr, status: res.status }).toEqual({ expr, status: 'success' });
        const noData = res.data.result.length === 0 || res.data.result.every((r) => Number.isNaN(Number(r.value[1])));
        if (noData) empty.push(expr);
      }
      expect(empty).toEqual([]);
      // The writer recorded its flushes: batches of the 1,180 items, each with its duration.
      const writerMetrics = await scrape(`http://127.0.0.1:${instances.get('writer')![0]!.ports.get(9464)}/metrics`);
      expect(writerMetrics).toMatch(/^crawlfleet_write_batch_items_sum\{[^}]*\} 1180$/m);
      expect(Number(/^crawlfleet_write_batch_duration_seconds_count\{[^}]*\} (\d+)$/m.exec(writerMetrics)?.[1] ?? 0)).toBeGreaterThan(0);
      mark('dashboard and metrics checked');
      process.stdout.write(`compose wiring: ${JSON.stringify(timings)}\nhealthchecks run: ${healthChecked.join('; ')}\n`);
    }, 420_000);
  });
});
