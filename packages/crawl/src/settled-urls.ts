import type { Candidate } from '@crawlfleet/frontier';

/**
 * URLs this process has seen settled in a crawl's frontier: admitted (queued, fetched or done),
 * out of scope, or refused for maxPages. Offering such a URL again changes nothing in Redis
 * (admitUrls-6.lua), and pages repeat most of their links (navigation, breadcrumbs), so a parser
 * that remembers them skips their fingerprint, their request and their lookup in the seen-URL index.
 * A URL refused only for depth is not remembered: a shorter path may admit it later.
 *
 * Scoped by the crawl's incarnation (id and registration time), so a crawl reset and seeded again
 * starts from nothing. Bounded: at most `scopeLimit` crawls (the oldest goes), and a crawl's set that
 * reaches `limit` URLs starts again empty (50,000 URLs hold a few MB).
 */
export class SettledUrls {
  private readonly scopes = new Map<string, Set<string>>();

  constructor(
    private readonly limit = 50_000,
    private readonly scopeLimit = 8,
  ) {}

  /** The candidates worth offering to Redis. */
  unsettled(scope: string, candidates: Candidate[]): Candidate[] {
    const known = this.scopes.get(scope);
    return known ? candidates.filter((c) => !known.has(c.url)) : candidates;
  }

  /** Records the outcome of an admission call: every candidate of it is settled but the too-deep ones. */
  settle(scope: string, offered: Candidate[]): void {
    let known = this.scopes.get(scope);
    if (!known) {
      if (this.scopes.size >= this.scopeLimit) this.scopes.delete(this.scopes.keys().next().value!);
      known = new Set();
      this.scopes.set(scope, known);
    } else if (known.size + offered.length > this.limit) {
      known.clear();
    }
    for (const c of offered) if (c.verdict !== 'too-deep') known.add(c.url);
  }
}
