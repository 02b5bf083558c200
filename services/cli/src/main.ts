#!/usr/bin/env node
import * as nodeModule from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { Command, Option } from 'commander';
import { assertCrawlId, errorMessage, redactUrl } from '@crawlfleet/core/light';
import { CONTROL_ACTIONS, INIT_FORMATS, finishedBefore, nonNegativeInt, positiveInt } from './arguments.js';
import type { crawlCommand } from './commands/crawl.js';
import type { controlCommand } from './commands/control.js';
import type { dashboardCommand } from './commands/dashboard.js';
import type { deadLettersCommand, replayCommand } from './commands/dead-letters.js';
import type { exportCommand } from './commands/export.js';
import type { gcCommand } from './commands/gc.js';
import type { initCommand } from './commands/init.js';
import type { monitorCommand } from './commands/monitor.js';
import type { recrawlCommand } from './commands/recrawl.js';
import type { seedCommand } from './commands/seed.js';
import type { shellCommand } from './commands/shell.js';
import type { statusCommand } from './commands/status.js';
import type { waitCommand } from './commands/wait.js';
import type { workerCommand } from './commands/worker.js';
import { exitCodeFor } from './exit-codes.js';
import { DEMO_START_URL } from './init-templates.js';
import { rootVersion } from './repo-root.js';

// Each command's module is imported when that command runs: the fleet's packages (Redis, BullMQ,
// the fetch and parse stacks) take about a second to load, which --version, --help, init and
// validate need not pay. Node's compile cache keeps their compiled code between runs: a `status`
// spends 13-28% less CPU starting. It lives in the user's own cache directory, not Node's default
// in the shared /tmp, where another user of the machine could plant code for it
// (NODE_COMPILE_CACHE moves it, NODE_DISABLE_COMPILE_CACHE=1 turns it off). It never throws: a
// directory that cannot be written only leaves it off.
nodeModule.enableCompileCache?.(process.env.NODE_COMPILE_CACHE || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'crawlfleet', 'compile-cache'));

// A crash is reported as Node would report it (stack, exit 1), but with every URL's credentials
// redacted: an error from a client library may quote the URL it was given.
process.on('uncaughtException', (err) => {
  process.stderr.write(`crawlfleet: ${redactUrl(err instanceof Error ? (err.stack ?? err.message) : String(err))}\n`);
  process.exit(1);
});
process.on('unhandledRejection', (reason) => {
  throw reason;
});

let exitCode = 0;
const run =
  <A extends unknown[]>(fn: (...args: A) => Promise<number>) =>
  async (...args: A) => {
    exitCode = await fn(...args);
  };
const crawlIdOption = () => new Option('--crawl-id <id>', 'crawl id').argParser(assertCrawlId);
const redisOption = () => new Option('--redis <url>', 'Redis URL (default: REDIS_URL)');

const program = new Command('crawlfleet')
  .description('A distributed web-scraping fleet on BullMQ.')
  .version(rootVersion(), '-V, --version', 'print the version')
  .showHelpAfterError()
  // commander echoes what it could not parse, which may be a URL with a password
  .configureOutput({ writeErr: (text) => process.stderr.write(redactUrl(text)) })
  .exitOverride();

program
  .command('crawl')
  .description('run every stage in this process until the crawl is done')
  .argument('<spider>', 'spider file (.json, .yaml, .js)')
  .addOption(crawlIdOption())
  .option('--out <file>', 'write items to FILE (.jsonl or .csv); default ./data/<crawl-id>/items.jsonl')
  .option('--mongo <url>', 'write items to MongoDB (default when MONGO_URL is set and --out is not)')
  .option('--warc <dir>', 'also archive every fetched page as WARC/1.1 in DIR (<crawl-id>-00001.warc.gz, ..., each with a CDXJ index)')
  .option('--warc-rollover <bytes>', 'begin a new WARC file once one reaches this size', positiveInt('--warc-rollover'))
  .addOption(redisOption())
  .option('--concurrency <n>', 'fetches in flight', positiveInt('--concurrency'), 16)
  .option('--max-pages <n>', 'stop admitting URLs after N pages', positiveInt('--max-pages'))
  .option('--proxies <file>', 'proxy URLs, one per line (default: PROXY_LIST)')
  .option('--parser-threads <n>', 'worker threads that parse pages (default 1; 0 parses in the main thread)', nonNegativeInt('--parser-threads'), 1)
  .option('--render-concurrency <n>', 'pages rendered in Chromium at once, for a spider with `render` (default 4)', positiveInt('--render-concurrency'))
  .option('--json', 'print the final status object as the last line of stdout')
  .option('--quiet', 'no live progress')
  .action(run(async (spider: string, opts: Parameters<typeof crawlCommand>[1]) => (await import('./commands/crawl.js')).crawlCommand(spider, opts)));

program
  .command('seed')
  .description('register a crawl and enqueue its start URLs; prints the crawl id')
  .argument('<spider>', 'spider file')
  .argument('[urls...]', 'more URLs to enqueue')
  .addOption(crawlIdOption())
  .option('--sink <target>', '"mongo" (the writers\' MONGO_URL), or FILE.jsonl or FILE.csv (default ./data/<crawl-id>/items.jsonl)')
  .option('--warc <dir>', 'also archive every fetched page as WARC/1.1 in DIR (<crawl-id>-00001.warc.gz, ..., each with a CDXJ index)')
  .option('--warc-rollover <bytes>', 'begin a new WARC file once one reaches this size', positiveInt('--warc-rollover'))
  .option('--urls-file <file>', 'a file of URLs, one per line')
  .option('--sitemap <url...>', 'seed from a sitemap, a sitemap index (gzip or not), or a robots.txt listing sitemaps')
  .addOption(redisOption())
  .action(run(async (spider: string, urls: string[], opts: Parameters<typeof seedCommand>[2]) => (await import('./commands/seed.js')).seedCommand(spider, urls, opts)));

program
  .command('recrawl')
  .description('start an ended crawl\'s next run: its known URLs fetched again, each only if it changed (a spider with "recrawl"); prints the crawl id')
  .addOption(crawlIdOption().makeOptionMandatory())
  .option('--due', 'only the URLs whose recrawl interval has passed (or that --sitemap says changed)')
  .option('--sitemap <url...>', 'sitemaps whose <lastmod> says which URLs changed since their last visit')
  .addOption(redisOption())
  .action(run(async (opts: Parameters<typeof recrawlCommand>[0]) => (await import('./commands/recrawl.js')).recrawlCommand(opts)));

program
  .command('worker')
  .description('run one stage as a long-lived worker serving every crawl')
  .argument('<stage>', 'fetcher, parser, writer or renderer')
  .option('--concurrency <n>', 'jobs in flight', positiveInt('--concurrency'))
  .option('--proxies <file>', 'fetcher: proxy URLs, one per line (default: PROXY_LIST)')
  .addOption(redisOption())
  .action(run(async (stage: string, opts: Parameters<typeof workerCommand>[1]) => (await import('./commands/worker.js')).workerCommand(stage, opts)));

program
  .command('wait')
  .description('block until the crawl ends: exit 0 done, 1 failed or cancelled, 124 timeout')
  .addOption(crawlIdOption().makeOptionMandatory())
  .option('--timeout <seconds>', 'give up after this long', positiveInt('--timeout'))
  .addOption(redisOption())
  .action(run(async (opts: Parameters<typeof waitCommand>[0]) => (await import('./commands/wait.js')).waitCommand(opts)));

program
  .command('status')
  .description('print the status object of one crawl, or of every crawl')
  .addOption(crawlIdOption())
  .option('--json', 'one JSON document on stdout')
  .addOption(redisOption())
  .action(run(async (opts: Parameters<typeof statusCommand>[0]) => (await import('./commands/status.js')).statusCommand(opts)));

program
  .command('monitor')
  .description('live terminal dashboard: queue depths, rates, ETA, workers, proxies')
  .addOption(crawlIdOption())
  .option('--interval <seconds>', 'refresh every N seconds', positiveInt('--interval'), 1)
  .option('--once', 'print one frame and exit')
  .addOption(redisOption())
  .action(run(async (opts: Parameters<typeof monitorCommand>[0]) => (await import('./commands/monitor.js')).monitorCommand(opts)));

program
  .command('dashboard')
  .description('Bull Board at /, status objects at /api/crawls, Prometheus metrics at /metrics, /healthz and /readyz')
  .option('--port <port>', 'port to listen on', positiveInt('--port'), 3000)
  .option('--host <address>', 'address to bind; anything but loopback needs DASHBOARD_USER and DASHBOARD_PASSWORD', '127.0.0.1')
  .option('--read-only', 'Bull Board without retry, promote, clean or remove')
  .addOption(redisOption())
  .action(run(async (opts: Parameters<typeof dashboardCommand>[0]) => (await import('./commands/dashboard.js')).dashboardCommand(opts)));

program
  .command('export')
  .description('write the items stored in MongoDB for a crawl to .jsonl or .csv')
  .addOption(crawlIdOption().makeOptionMandatory())
  .requiredOption('--out <file>', 'FILE.jsonl or FILE.csv')
  .option('--mongo <url>', 'MongoDB URL (default: MONGO_URL)')
  .action(run(async (opts: Parameters<typeof exportCommand>[0]) => (await import('./commands/export.js')).exportCommand(opts)));

program
  .command('dead-letters')
  .description('list the URLs a crawl gave up on: URL, stage, code, reason and attempts')
  .addOption(crawlIdOption().makeOptionMandatory())
  .option('--code <code>', 'only this code (ERR_HTTP_STATUS, ERR_BLOCKED, ERR_STALLED, ...)')
  .option('--url-regex <regex>', 'only URLs that match')
  .option('--json', 'one JSON array on stdout')
  .addOption(redisOption())
  .action(run(async (opts: Parameters<typeof deadLettersCommand>[0]) => (await import('./commands/dead-letters.js')).deadLettersCommand(opts)));

program
  .command('replay')
  .description('send dead letters back to work: each URL is fetched again (a write dead letter is written again)')
  .addOption(crawlIdOption().makeOptionMandatory())
  .option('--code <code>', 'only this code')
  .option('--url-regex <regex>', 'only URLs that match')
  .addOption(redisOption())
  .action(run(async (opts: Parameters<typeof replayCommand>[0]) => (await import('./commands/dead-letters.js')).replayCommand(opts)));

program
  .command('validate')
  .description('check a spider file without crawling: exit 0, or 2 naming the file, the path and the problem')
  .argument('<spider>', 'spider file (.json, .yaml, .js)')
  .action(run(async (spider: string) => (await import('./commands/validate.js')).validateCommand(spider)));

program
  .command('env')
  .description("every environment variable crawlfleet reads, with its default and meaning (the README's configuration table)")
  .action(
    run(async () => {
      const { envTableMarkdown } = await import('@crawlfleet/core');
      process.stdout.write(`${envTableMarkdown()}\n`);
      return 0;
    }),
  );

program
  .command('init')
  .description('write a commented starter spider NAME.<format> in the current folder (it crawls the books demo site)')
  .argument('<name>', 'spider name: letters, digits, "_", "." and "-"')
  .addOption(new Option('--format <format>', 'file format').choices(INIT_FORMATS).default('json'))
  .option('--url <url>', 'start URL; allowedDomains is its host, and allowPrivateAddresses is true only on loopback', DEMO_START_URL)
  .option('--force', 'overwrite an existing file')
  .action(run(async (name: string, opts: Parameters<typeof initCommand>[1]) => (await import('./commands/init.js')).initCommand(name, opts)));

program
  .command('shell')
  .description("fetch one page with a spider's settings and print the items and links it would produce; stores nothing, needs no Redis")
  .argument('<url>', 'page to fetch')
  .option('--spider <file>', 'spider whose user agents, limits, address policy and rules apply (default: follow every a[href], no items, private addresses refused)')
  .option('--json', 'one JSON document on stdout: {url, finalUrl, status, contentType, items, links, invalid}')
  .addHelpText(
    'after',
    '\nrobots.txt is NOT consulted, and politeness and proxies do not apply: this is one direct request.\n' +
      'Redirects are followed. An HTTP error status is shown (exit 0) and the page is parsed only when the fleet would parse it.\n' +
      'Exit 1 when no response came (network error, an address the SSRF guard refuses), 2 for a bad URL or spider.\n',
  )
  .action(run(async (url: string, opts: Parameters<typeof shellCommand>[1]) => (await import('./commands/shell.js')).shellCommand(url, opts)));

program
  .command('gc')
  .description('remove the finished crawls past the retention from Redis, keeping a summary of each that status shows')
  .addOption(
    new Option('--finished-before <duration>', 'collect the crawls that finished longer ago than this (7d, 36h, 90m) or before this moment (ISO 8601); default: CRAWL_RETENTION (7d)').argParser(
      finishedBefore,
    ),
  )
  .option('--dry-run', 'list the crawls that would be collected; change nothing')
  .option('--json', 'one JSON document on stdout')
  .option('--quiet', 'only the total line')
  .addOption(redisOption())
  .action(run(async (opts: Parameters<typeof gcCommand>[0]) => (await import('./commands/gc.js')).gcCommand(opts)));

for (const action of CONTROL_ACTIONS) {
  const what = { pause: 'pause a crawl', resume: 'resume a paused crawl', cancel: 'cancel a crawl', reset: "forget a crawl's queue, dedup state and counters (items stay)" }[action];
  program
    .command(action)
    .description(what)
    .addOption(crawlIdOption().makeOptionMandatory())
    .addOption(redisOption())
    .action(run(async (opts: Parameters<typeof controlCommand>[1]) => (await import('./commands/control.js')).controlCommand(action, opts)));
}

try {
  await program.parseAsync(process.argv);
  process.exitCode = exitCode;
} catch (err) {
  const code = exitCodeFor(err);
  const isCommander = typeof (err as { code?: unknown }).code === 'string' && String((err as { code: string }).code).startsWith('commander.');
  // commander already printed its own message; ours names the file, path and problem.
  if (!isCommander) process.stderr.write(`crawlfleet: ${redactUrl(errorMessage(err))}\n`);
  process.exitCode = code;
}
// Short commands end here; long-running ones (worker, crawl) keep the event loop alive themselves.
if (!['worker', 'dashboard'].includes(process.argv[2] ?? '')) {
  setTimeout(() => process.exit(process.exitCode ?? 0), 100).unref();
}
