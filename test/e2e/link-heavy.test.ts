import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { scriptSource } from '@crawlfleet/core';
import { startServer } from '../fixtures/http-server.mjs';
import { REDIS_URL, dropPrefix, readJsonl, spawnCli, resultWithin, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

const LINKS = 200_000;
const ADMIT_SOURCE = scriptSource('admitUrls');
const ADMIT_SHA = createHash('sha1').update(ADMIT_SOURCE).digest('hex');

type SlowlogEntry = [number, number, number, string[]];

describe('a page with 200,000 links', () => {
  const prefix = uniquePrefix('links');
  const dir = tempDir('links');
  afterAll(() => dropPrefix(prefix));

  test('stores its items, admits exactly limits.maxLinksPerPage links in calls of at most 1,000, and Redis keeps answering others at once', async () => {
    const links = Array.from({ length: LINKS }, (_, i) => `<a href="/l/${i}">${i}</a>`).join('\n');
    const page = `<!DOCTYPE html><html><head><title>Everything</title></head><body><h1>The big index</h1>${links}</body></html>`;
    const site = await startServer((req, res) => {
      if (req.url === '/robots.txt') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('User-agent: *\nDisallow: /l/\n');
      if (req.url === '/') return void res.writeHead(200, { 'content-type': 'text/html' }).end(page);
      res.writeHead(404).end();
    });
    const spider = writeJson(dir, 'links.json', {
      name: 'links',
      startUrls: [`${site.url}/`],
      allowPrivateAddresses: true,
      follow: [{ css: 'a' }],
      items: [{ type: 'index', match: '/$', fields: { heading: { css: 'h1', required: true } } }],
    });
    const probe = new Redis(REDIS_URL);
    const admin = new Redis(REDIS_URL);
    const [, slowlogThreshold] = (await admin.config('GET', 'slowlog-log-slower-than')) as [string, string];
    const [, slowlogLength] = (await admin.config('GET', 'slowlog-max-len')) as [string, string];
    // Every command into the slow log, to read the size of each admission call.
    await admin.config('SET', 'slowlog-max-len', '1000000');
    await admin.config('SET', 'slowlog-log-slower-than', '0');
    await admin.slowlog('RESET');
    let worstPingMs = 0;
    let pings = 0;
    let probing = true;
    const pinging = (async () => {
      while (probing) {
        const t = performance.now();
        await probe.ping();
        worstPingMs = Math.max(worstPingMs, performance.now() - t);
        pings++;
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    try {
      const out = join(dir, 'links.jsonl');
      // BullMQ's own lock duration (30 s), not the suite's 5 s: the parser thread reads the 200,000
      // links in one synchronous stretch, 16 s of it with `yes > /dev/null` on a core, and a job
      // lock that lapses meanwhile sends the page round again and again (seen: "could not renew
      // lock", then no end within 150 s). This test is about the size of Redis commands.
      const env = testEnv(prefix, { LOCK_DURATION_MS: '30000' });
      const crawl = spawnCli(['crawl', spider, '--crawl-id', 'links', '--out', out, '--json', '--quiet', '--concurrency', '64'], { env });
      const run = await resultWithin(crawl, 150_000, 'the link-heavy crawl');
      probing = false;
      await pinging;
      const slowlog = (await admin.slowlog('GET', -1)) as SlowlogEntry[];
      expect(run.code).toBe(0);
      expect(readJsonl(out).map((i) => i.heading)).toEqual(['The big index']);
      const status = JSON.parse(run.stdout.trim().split('\n').pop()!);
      // 10,000 admitted (then skipped by robots.txt, unfetched); the other 190,000 skipped at once.
      expect(status.counters).toMatchObject({ seen: 10_001, fetched: 1, parsed: 1, items: 1, written: 1, failed: 0, skipped: LINKS });
      expect(site.requests.filter((r) => r.path.startsWith('/l/'))).toHaveLength(0);
      const overflowLines = run.stderr.split('\n').filter((l) => l.includes('more links than limits.maxLinksPerPage'));
      expect(overflowLines).toHaveLength(1);
      expect(JSON.parse(overflowLines[0]!)).toMatchObject({ links: LINKS, maxLinksPerPage: 10_000, skipped: LINKS - 10_000 });

      // Each admission call carries 7 keys, 9 settings (budgets, the take, two key prefixes, the crawl id, its run), a
      // (host, concurrency, delay, count) group per host (one here) and a (fingerprint, verdict + request) pair per URL.
      // A connection's first call of a script may go as EVAL with its text (the parser thread's does).
      const isAdmission = (command: string[]) =>
        (command[0]?.toLowerCase() === 'evalsha' && command[1] === ADMIT_SHA) ||
        (command[0]?.toLowerCase() === 'eval' && ADMIT_SOURCE.startsWith(command[1]!.replace(/\.\.\. \(\d+ more bytes\)$/, '')));
      const argumentsOf = (command: string[]) => {
        const more = /^\.\.\. \((\d+) more arguments\)$/.exec(command[command.length - 1]!);
        return more ? command.length - 1 + Number(more[1]) : command.length;
      };
      const admissions = slowlog.filter((e) => isAdmission(e[3]));
      const urlsPerCall = admissions.map((e) => (argumentsOf(e[3]) - 3 - 7 - 9 - 4) / 2);
      expect(urlsPerCall.filter((n) => n > 1).sort((a, b) => b - a)).toEqual(Array(10).fill(1000));
      // What holds Redis up for every other client is one command's size: no command of the whole
      // crawl, admission or any other, carries more than one 1,000-URL admission call's arguments.
      // Counted in Redis's own log, so the machine's speed does not enter it.
      const largestCommand = slowlog.reduce((largest, e) => Math.max(largest, argumentsOf(e[3])), 0);
      expect(largestCommand).toBeLessThanOrEqual(3 + 7 + 9 + 4 + 2 * 1000);
      const slowestMs = slowlog.reduce((worst, e) => Math.max(worst, e[2] / 1000), 0);
      process.stderr.write(
        `links: ${admissions.length} admission calls, largest command ${largestCommand} arguments, slowest command ${slowestMs.toFixed(1)} ms, worst PING ${worstPingMs.toFixed(1)} ms over ${pings} pings\n`,
      );
      expect(pings).toBeGreaterThan(50);
      // The slowest command's time and the worst PING are figures of speed, printed above, not judged
      // here: Redis's own time for a command stretches when Redis loses its core mid-command (57 ms
      // seen loaded against 12-30 ms quiet, and 209 ms with the chunking broken on purpose), and a
      // PING's round trip adds this process's event-loop stalls and the machine's load (1,061 ms seen
      // in CI with the chunking intact, 205 ms without it). Both failed on loaded machines with no
      // bug (#29). What they stood for is judged exactly above: the admission calls' sizes and the
      // largest command's. How long Redis is held belongs to the bench.
    } finally {
      probing = false;
      await admin.config('SET', 'slowlog-log-slower-than', slowlogThreshold);
      await admin.config('SET', 'slowlog-max-len', slowlogLength);
      await admin.slowlog('RESET');
      probe.disconnect();
      admin.disconnect();
      await site.close();
    }
  });
});
