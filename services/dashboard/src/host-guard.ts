import { isIP } from 'node:net';

/**
 * Which requests the dashboard answers, by where they were sent (DNS rebinding and cross-site
 * requests). A page of another site can make a browser send requests to 127.0.0.1: after its name
 * is rebound to 127.0.0.1 they carry that name in `Host`, and a write sent from the page carries the
 * page's own `Origin`. Like Vite's `allowedHosts` and Jupyter's local host check:
 * - **Host**: loopback names (`localhost`, `*.localhost`), IP addresses (no name to rebind), the
 *   `--host` address and the names of DASHBOARD_ALLOWED_HOSTS are answered; `*` answers any. With
 *   credentials and no list, any Host is answered: a rebound name never had the password.
 * - **Origin** of a request that changes something (any method but GET, HEAD and OPTIONS): none (not a
 *   browser: curl, scripts), the dashboard's own (same host and port as `Host`), or a listed name
 *   (a reverse proxy that rewrites `Host`). `null` (a sandboxed or opaque page) is refused.
 */
export interface HostRule {
  /** the bind address (`--host`), lower case */
  bind: string;
  /** DASHBOARD_ALLOWED_HOSTS: exact names, or `.example.com` for it and every name under it */
  allowed: readonly string[];
  /** answer any Host (the list holds `*`, or credentials guard every page and no list is set) */
  anyHost: boolean;
}

/** Pure: the rule for a dashboard bound to `bind`, with DASHBOARD_ALLOWED_HOSTS and with or without credentials. */
export function hostRule(bind: string, allowedHosts: readonly string[], hasCredentials: boolean): HostRule {
  const allowed = allowedHosts.map((h) => h.trim().toLowerCase().replace(/\.$/, '')).filter((h) => h !== '');
  return { bind: hostName(bind) ?? '', allowed: allowed.filter((h) => h !== '*'), anyHost: allowed.includes('*') || (hasCredentials && allowed.length === 0) };
}

/** Pure: the host name of a `Host` header or an authority (`Name:3000`, `[::1]:3000`): lower case, no port, brackets or final dot. */
export function hostName(authority: string): string | undefined {
  const text = authority.trim().toLowerCase();
  const name = text.startsWith('[') ? text.slice(1, text.indexOf(']')) : isIP(text) === 6 ? text : text.replace(/:\d*$/, '');
  return name === '' ? undefined : name.replace(/\.$/, '');
}

function listed(name: string, allowed: readonly string[]): boolean {
  return allowed.some((a) => (a.startsWith('.') ? name === a.slice(1) || name.endsWith(a) : name === a));
}

/** Pure: does the dashboard answer a request with this `Host` header? (No header: not a browser; HTTP/1.0.) */
export function isAllowedHost(host: string | undefined, rule: HostRule): boolean {
  if (rule.anyHost || host === undefined) return true;
  const name = hostName(host);
  if (name === undefined) return false;
  return isIP(name) !== 0 || name === 'localhost' || name.endsWith('.localhost') || name === rule.bind || listed(name, rule.allowed);
}

/** Pure: may a request that changes something, sent with this `Origin`, be taken? */
export function isAllowedOrigin(origin: string | undefined, host: string | undefined, rule: HostRule): boolean {
  if (origin === undefined) return true;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false; // `null`, or garbage
  }
  if (host !== undefined && url.host !== '' && url.host === host.trim().toLowerCase()) return true;
  const name = hostName(url.host);
  return name !== undefined && listed(name, rule.allowed);
}

/** Methods that only read: Bull Board's changes are POST, PUT and DELETE. */
export const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Pure: why a request is refused (the body of its 403), or undefined when it may go on. */
export function refusal(request: { method: string; host: string | undefined; origin: string | undefined }, rule: HostRule): string | undefined {
  if (!isAllowedHost(request.host, rule)) {
    return `dashboard: refused a request for host ${JSON.stringify(hostName(request.host ?? '') ?? request.host)}: a name that is not this machine's may be a web page's DNS rebinding. The dashboard answers localhost, IP addresses and its --host address; to reach it by this name, add the name to DASHBOARD_ALLOWED_HOSTS.\n`;
  }
  if (!SAFE_METHODS.has(request.method.toUpperCase()) && !isAllowedOrigin(request.origin, request.host, rule)) {
    return `dashboard: refused a change sent from ${request.origin} (a cross-site request): changes are taken from the dashboard's own pages, from clients that send no Origin (curl, scripts), and from the names in DASHBOARD_ALLOWED_HOSTS.\n`;
  }
  return undefined;
}
