import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import ipaddr from 'ipaddr.js';
import { NonRetryableError } from '@crawlfleet/core';

/** Ranges a crawl may reach only with `allowPrivateAddresses` (the SSRF guard). */
const PUBLIC_RANGE = 'unicast';

/** Pure: is this IP literal a public unicast address? */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed.range() === PUBLIC_RANGE;
}

export class ForbiddenAddressError extends NonRetryableError {
  constructor(host: string, address: string) {
    super('ERR_FORBIDDEN_ADDRESS', `${host} resolves to ${address}, a private, loopback or link-local address (set allowPrivateAddresses to crawl it)`, { host, address });
  }
}

/** Checks a URL whose host is an IP literal (DNS lookup is never called for those). */
export function assertUrlAddressAllowed(url: URL, allowPrivate: boolean): void {
  if (allowPrivate) return;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (ipaddr.isValid(host) && !isPublicAddress(host)) throw new ForbiddenAddressError(url.hostname, host);
  if (host === 'localhost' || host.endsWith('.localhost')) throw new ForbiddenAddressError(url.hostname, 'loopback');
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

export type Lookup = (hostname: string, options: object, callback: LookupCallback) => void;

/** Pure: `HOST_RESOLVE` ("name:address,name:address", like curl --resolve) as a map. */
export function parseHostResolve(value: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const pair of value.split(/[\s,]+/).filter(Boolean)) {
    const at = pair.indexOf(':');
    const name = pair.slice(0, at).toLowerCase();
    const address = pair.slice(at + 1).replace(/^\[|\]$/g, '');
    if (at <= 0 || !ipaddr.isValid(address)) throw new NonRetryableError('ERR_CONFIG', `HOST_RESOLVE: ${JSON.stringify(pair)} is not name:address`);
    map.set(name, address);
  }
  return map;
}

/**
 * The fetcher's dns.lookup: names in `overrides` resolve to their given address, the rest through
 * DNS; and unless private addresses are allowed, a private answer is refused, so a public name that
 * resolves to 10.0.0.1 (DNS rebinding) is refused at connect time, on the first request and on
 * every redirect. Returns undefined when Node's own lookup would do.
 */
export function makeLookup(overrides: ReadonlyMap<string, string>, allowPrivate: boolean): Lookup | undefined {
  if (allowPrivate && overrides.size === 0) return undefined;
  return (hostname, options, callback) => {
    const answer = (err: NodeJS.ErrnoException | null, list: LookupAddress[]) => {
      if (err) return callback(err, []);
      const bad = allowPrivate ? undefined : list.find((a) => !isPublicAddress(a.address));
      if (bad) return callback(Object.assign(new ForbiddenAddressError(hostname, bad.address), { errno: undefined }), []);
      if ((options as { all?: boolean }).all) return callback(null, list);
      callback(null, list[0]!.address, list[0]!.family);
    };
    const fixed = overrides.get(hostname.toLowerCase());
    if (fixed) return answer(null, [{ address: fixed, family: fixed.includes(':') ? 6 : 4 }]);
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => answer(err, addresses as LookupAddress[]));
  };
}

/** The guarded lookup without overrides. */
export const guardedLookup: Lookup = makeLookup(new Map(), false)!;
