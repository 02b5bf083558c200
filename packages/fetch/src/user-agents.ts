/** A small built-in pool of current desktop browsers, used when neither the spider nor USER_AGENTS names any. */
export const DEFAULT_USER_AGENTS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_7_1) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15',
];

/** Rotates user agents round-robin: the spider's list, else the environment's, else the built-in pool. */
export class UserAgentRotation {
  private next = 0;
  constructor(private readonly envAgents: readonly string[]) {}

  pick(spiderAgents?: readonly string[]): string {
    const pool = spiderAgents?.length ? spiderAgents : this.envAgents.length ? this.envAgents : DEFAULT_USER_AGENTS;
    const agent = pool[this.next % pool.length]!;
    this.next = (this.next + 1) % 1_000_000;
    return agent;
  }
}
