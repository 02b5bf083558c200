import { CrawlfleetError, errorMessage, loadEnv, loadSpiderDefinition, validateSpider, type Spider, type SpiderDefinitionFile } from '@crawlfleet/core';
import { UserAgentRotation, makeLookup, parseHostResolve } from '@crawlfleet/fetch';
import { allowedHosts, scopeVerdict } from '@crawlfleet/frontier';
import { EXIT, ExitError } from '../exit-codes.js';
import { shellPage, type ShellPage } from '../shell-page.js';

/** Without --spider: follow every link, extract no items, and refuse private addresses (the default). */
export function defaultShellSpider(url: string): Spider {
  return validateSpider({ name: 'shell', startUrls: [url], follow: [{ css: 'a[href]' }] }, '(default shell spider)');
}

function parseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ExitError(EXIT.usage, `shell: not a URL: ${JSON.stringify(value)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ExitError(EXIT.usage, `shell: only http and https URLs are fetched, got ${url.protocol}`);
  return url.href;
}

function verdictNote(page: ShellPage): string | undefined {
  const v = page.verdict;
  if (v.kind === 'retry') return `not parsed: ${v.reason}; the fleet retries it (retry.statusCodes), then gives it up`;
  if (v.kind === 'fail') return `not parsed: ${v.reason}; the fleet gives it up (a dead letter)`;
  if (v.kind === 'blocked') return `not parsed: ${v.reason}; the fleet retries it through another proxy, then gives it up as ERR_BLOCKED`;
  if (v.kind === 'redirect') return `not parsed: a redirect to ${v.location}; the fleet follows it as a new link`;
  if (!page.parsed) return 'not parsed: not HTML';
  return undefined;
}

/** Pure: the page as a person reads it. The links the crawl would not admit from a start page are marked. */
export function formatShellPage(page: ShellPage, spider: Spider): string {
  const allowed = allowedHosts(spider);
  const note = verdictNote(page);
  const lines = [
    `status:       ${page.status}`,
    `final URL:    ${page.finalUrl}`,
    `content type: ${page.contentType ?? '(none)'}`,
    `bytes:        ${page.bytes}`,
    `time:         ${page.ms} ms`,
    ...(note ? [note] : []),
    '',
    `items (${page.items.length}):`,
    JSON.stringify(page.items, null, 2),
    '',
    `links (${page.links.length}):`,
    ...page.links.map((link) => {
      const verdict = scopeVerdict(link, 1, spider, allowed);
      return verdict === 'admit' ? `  ${link}` : `  ${link}  (${verdict}: not followed)`;
    }),
    '',
    `invalid: ${page.invalid}`,
    ...page.invalidReasons.map((reason) => `  ${reason}`),
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * `crawlfleet shell URL [--spider SPIDER] [--json]`: fetches one page with the spider's settings and
 * prints what the fleet would make of it. Stores nothing, needs no Redis. Exit 0 whatever the HTTP
 * status, 1 when no response came (network error, refused address), 2 for a bad URL or spider.
 */
export async function shellCommand(rawUrl: string, options: { spider?: string; json?: boolean }): Promise<number> {
  const url = parseUrl(rawUrl);
  const { spider, module }: SpiderDefinitionFile = options.spider ? await loadSpiderDefinition(options.spider) : { spider: defaultShellSpider(url) };
  const env = loadEnv();
  const lookup = makeLookup(parseHostResolve(env.hostResolve), true);
  let page: ShellPage;
  try {
    page = await shellPage(url, spider, { userAgent: new UserAgentRotation(env.userAgents).pick(spider.userAgents), ...(lookup ? { lookup } : {}), ...(module ? { module } : {}) });
  } catch (err) {
    if (!(err instanceof CrawlfleetError)) throw err;
    const hint = !options.spider && err.code === 'ERR_FORBIDDEN_ADDRESS' ? ' (without --spider, shell refuses private addresses: pass a spider with allowPrivateAddresses)' : '';
    throw new ExitError(EXIT.failure, `shell: ${url}: ${errorMessage(err)}${hint}`);
  }
  if (options.json) {
    const { finalUrl, status, contentType, items, links, invalid, invalidReasons } = page;
    process.stdout.write(`${JSON.stringify({ url, finalUrl, status, contentType, items, links, invalid, invalidReasons })}\n`);
  } else {
    process.stdout.write(formatShellPage(page, spider));
  }
  return EXIT.ok;
}
