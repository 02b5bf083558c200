import type { Spider } from '@crawlfleet/core';
import { headerValue, type Headers } from './headers.js';
import { summarizePage, type PageSummary } from './page-summary.js';

export type BlockSettings = Pick<Spider, 'blockPatterns' | 'blockPageMaxChars' | 'blockMarkers'>;

export type BlockVerdict = { blocked: false } | { blocked: true; signal: string; reason: string };

/**
 * Block and challenge pages that vendors serve, recognised by their own markup. Each is checked on a
 * short page only: these scripts and ids also sit, harmlessly, on ordinary pages of protected sites
 * (Cloudflare's bot-management snippet, a reCAPTCHA on a contact form), whose text makes them long.
 */
const VENDOR_MARKERS: { signal: string; html: RegExp }[] = [
  { signal: 'cloudflare-challenge', html: /window\._cf_chl_opt|cf-browser-verification|__cf_chl_(?:f|rt|jschl|captcha|managed)_tk__?=/i },
  // Cloudflare's 1xxx errors that refuse the client (banned IP, country or browser, rate limited,
  // a firewall rule), not the ones that report an origin down.
  { signal: 'cloudflare-error', html: /data-translate=["']error["']>Error<\/span>\s*<span>10(?:0[5-9]|1\d|20)<\/span>/i },
  { signal: 'akamai', html: /errors\.edgesuite\.net|Reference&#32;&#35;\d+&#46;/i },
  { signal: 'perimeterx', html: /id=["']?px-captcha\b|captcha\.px-cdn\.net|\/captcha\/captcha\.js\?a=c&/i },
  { signal: 'datadome', html: /captcha-delivery\.com/i },
  { signal: 'incapsula', html: /_Incapsula_Resource\?(?:CWUDNSAI|SWUDNSAI)=|Incapsula incident ID/i },
  { signal: 'aws-waf', html: /window\.gokuProps|\.(?:token|captcha)\.awswaf\.com/i },
  { signal: 'amazon-captcha', html: /\/errors\/validateCaptcha/i },
  { signal: 'sucuri', html: /Sucuri Web[Ss]ite Firewall|cloudproxy@sucuri\.net/ },
];

/** Captcha widgets: a challenge when a form shows one and asks nothing else (no field to type in). */
const CAPTCHA_WIDGET = /class=["'][^"']*\b(?:g-recaptcha|h-captcha|cf-turnstile)\b|(?:google\.com|recaptcha\.net)\/recaptcha\/api|hcaptcha\.com\/1\/api\.js|challenges\.cloudflare\.com\/turnstile/i;

/** What the text of an interstitial says, whoever serves it (checked on short pages, case-insensitive). */
const CHALLENGE_PHRASES: RegExp[] = [
  /\bverify(?:ing)? (?:that )?you(?: are|'re|’re) (?:a )?human\b/,
  /\bconfirm (?:that )?you(?: are|'re|’re) (?:a )?human\b/,
  /\bare you (?:a )?(?:robot|human)\?/,
  /\bmake sure you(?:'re|’re| are) not a robot\b/,
  /\bpress (?:&|and) hold\b/,
  /\byou have been blocked\b/,
  /\bchecking (?:if the site connection is secure|your browser before accessing)\b/,
  /\bpardon our interruption\b/,
  /\baccess to this page has been denied\b/,
  /\byour access to this site has been limited\b/,
  /\brequest unsuccessful\. incapsula incident id\b/,
  /\breference #\s?\d+\.[0-9a-f]+\.\d+\.[0-9a-f]+/,
];

/** Block detection reads this much of a page at most: a block page is far shorter. */
export const BLOCK_SCAN_CHARS = 1024 * 1024;

export interface BlockFacts {
  html: string;
  headers?: Headers;
}

/**
 * Pure: is this HTML page a block or challenge page rather than content? Block pages are short, so
 * nothing on a page whose visible text runs past `blockPageMaxChars` counts: a manual that explains
 * "access denied" errors, or a home page whose login box mentions a captcha, is content. On a short
 * page, a block is any of:
 * - a `blockPatterns` entry in its `<title>`, or in its visible text unless the page is a login or
 *   contact form (a password field, or two or more fields to fill in);
 * - a vendor's own block or challenge markup (Cloudflare, Akamai, PerimeterX, DataDome, Imperva,
 *   AWS WAF, Amazon, Sucuri) or an interstitial's wording ("verify you are human", ...);
 * - a captcha widget (reCAPTCHA, hCaptcha, Turnstile) in a page with no field to type into.
 * Cloudflare marks its challenges in a header (`cf-mitigated: challenge`), which holds on any page.
 */
export function detectBlock(page: BlockFacts, settings: BlockSettings): BlockVerdict {
  if (settings.blockMarkers && headerValue(page.headers, 'cf-mitigated')?.toLowerCase() === 'challenge') {
    return block('cloudflare-challenge', 'Cloudflare challenge (cf-mitigated: challenge)');
  }
  const html = page.html.length > BLOCK_SCAN_CHARS ? page.html.slice(0, BLOCK_SCAN_CHARS) : page.html;
  const summary = summarizePage(html, settings.blockPageMaxChars);
  if (!summary.short) return { blocked: false };
  const pattern = matchPattern(summary, settings.blockPatterns);
  if (pattern) return block('pattern', `the page says ${JSON.stringify(pattern)}`);
  if (!settings.blockMarkers) return { blocked: false };
  for (const marker of VENDOR_MARKERS) {
    if (marker.html.test(html)) return block(marker.signal, `a ${marker.signal} block page`);
  }
  const words = `${summary.title} ${summary.text}`.toLowerCase();
  const phrase = CHALLENGE_PHRASES.find((p) => p.test(words));
  if (phrase) return block('challenge-text', `a challenge page ("${phrase.exec(words)![0]}")`);
  if (summary.textInputs === 0 && CAPTCHA_WIDGET.test(html)) return block('captcha-form', 'a captcha form with nothing else to fill in');
  return { blocked: false };
}

/**
 * A page that asks for a password, or for two or more fields, is a login or contact form: its text
 * may well mention the captcha that guards it. A captcha wall asks for one answer at most.
 */
function asksForMoreThanACaptcha(summary: PageSummary): boolean {
  return summary.passwordInputs > 0 || summary.textInputs >= 2;
}

function matchPattern(summary: PageSummary, patterns: readonly string[]): string | undefined {
  if (patterns.length === 0) return undefined;
  const title = summary.title.toLowerCase();
  const text = asksForMoreThanACaptcha(summary) ? '' : summary.text.toLowerCase();
  return patterns.find((p) => {
    const needle = p.toLowerCase();
    return title.includes(needle) || text.includes(needle);
  });
}

function block(signal: string, reason: string): BlockVerdict {
  return { blocked: true, signal, reason: `blocked: ${reason}` };
}
