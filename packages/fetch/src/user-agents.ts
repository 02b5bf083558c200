import { HeaderGenerator } from 'header-generator';

/** What a request asks for when its user agent is the spider's or USER_AGENTS': a plain browser-like set around it. */
const PLAIN_HEADERS = {
  accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
  'accept-language': 'en-US,en;q=0.8',
};

/** How many browsers a process draws at its first request; it rotates through them. */
const BROWSER_POOL_SIZE = 24;

let browserPool: Map<string, Record<string, string>> | undefined;

/**
 * Desktop browsers of today, each a whole header set that belongs together (user agent, client hints,
 * Accept, Sec-Fetch-*, Accept-Language), from Apify's header-generator, which got-scraping and Crawlee
 * use: a Bayesian network trained on real browsers' traffic, updated with each release. A
 * hand-written list goes stale (ours stopped at Chrome 131), and a Chrome user agent without Chrome's
 * client hints is itself a tell.
 */
function browsers(): Map<string, Record<string, string>> {
  if (!browserPool) {
    const generator = new HeaderGenerator({
      browsers: ['chrome', 'firefox', 'safari', 'edge'],
      devices: ['desktop'],
      operatingSystems: ['windows', 'macos', 'linux'],
      locales: ['en-US', 'en'],
      httpVersion: '1',
    });
    browserPool = new Map();
    for (let i = 0; browserPool.size < BROWSER_POOL_SIZE && i < BROWSER_POOL_SIZE * 4; i++) {
      const headers = Object.fromEntries(Object.entries(generator.getHeaders()).map(([name, value]) => [name.toLowerCase(), value]));
      // What got decodes (it cannot read zstd); and the connection is the agent's to manage.
      headers['accept-encoding'] = 'gzip, deflate, br';
      delete headers.connection;
      browserPool.set(headers['user-agent']!, headers);
    }
  }
  return browserPool;
}

/**
 * The identity headers of a request for this user agent: a generated browser's whole set, or, for a
 * user agent the spider or USER_AGENTS gave, that user agent with plain Accept headers (client hints
 * of some browser would contradict it).
 */
export function identityHeaders(userAgent: string): Record<string, string> {
  return browsers().get(userAgent) ?? { 'user-agent': userAgent, ...PLAIN_HEADERS };
}

/** Rotates user agents round-robin: the spider's list, else the environment's, else generated browsers. */
export class UserAgentRotation {
  private next = 0;
  constructor(private readonly envAgents: readonly string[]) {}

  pick(spiderAgents?: readonly string[]): string {
    const pool = spiderAgents?.length ? spiderAgents : this.envAgents.length ? this.envAgents : [...browsers().keys()];
    const agent = pool[this.next % pool.length]!;
    this.next = (this.next + 1) % 1_000_000;
    return agent;
  }
}
