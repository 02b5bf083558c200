import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import ipaddr from 'ipaddr.js';
import { NonRetryableError } from '@crawlfleet/core';
import { addressKind } from './special-addresses.js';

/**
 * What the SSRF guard lets a crawl reach: public unicast addresses always; every address with
 * `allowPrivate`; and the private addresses inside the `allowed` ranges (CIDR or single addresses,
 * an intranet or a test site), the rest of the private space staying refused.
 */
export interface AddressPolicy {
  allowPrivate: boolean;
  allowed: readonly string[];
}

/** Pure: the policy of a spider's settings (`allowPrivateAddresses`, `allowedAddresses`). */
export function addressPolicy(settings: { allowPrivateAddresses: boolean; allowedAddresses?: readonly string[] | undefined }): AddressPolicy {
  return { allowPrivate: settings.allowPrivateAddresses, allowed: settings.allowedAddresses ?? [] };
}

function toPolicy(policy: boolean | AddressPolicy): AddressPolicy {
  return typeof policy === 'boolean' ? { allowPrivate: policy, allowed: [] } : policy;
}

/**
 * An IPv6 literal as the WHATWG URL parser writes it (`::1.2.3.4` becomes `::102:304`): ipaddr.js
 * reads every `::a.b.c.d` as IPv4-mapped, though without `ffff` it is the IPv4-compatible form.
 */
function canonicalIPv6(bare: string): string {
  if (!bare.includes(':')) return bare;
  try {
    return new URL(`http://[${bare}]/`).hostname.slice(1, -1);
  } catch {
    return bare;
  }
}

/** An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is the IPv4 address it carries. */
function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  const bare = canonicalIPv6(address.replace(/^\[|\]$/g, ''));
  if (!ipaddr.isValid(bare)) return undefined;
  const parsed = ipaddr.parse(bare);
  return parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress() ? (parsed as ipaddr.IPv6).toIPv4Address() : parsed;
}

/** Pure: "10.0.0.0/8", "127.0.0.1" or "fd00::/8" as a range; undefined when it is none of these. */
export function parseAddressRange(range: string): [ipaddr.IPv4 | ipaddr.IPv6, number] | undefined {
  try {
    if (range.includes('/')) return ipaddr.parseCIDR(range);
    const single = parseAddress(range);
    return single ? [single, single.kind() === 'ipv4' ? 32 : 128] : undefined;
  } catch {
    return undefined;
  }
}

/** Pure: is this IP literal a public address, outside every special-purpose range (addressKind)? */
export function isPublicAddress(address: string): boolean {
  const parsed = parseAddress(address);
  return parsed !== undefined && addressKind(parsed) === 'public';
}

/** Pure: may a crawl under this policy connect to this IP literal? Anything that is not an IP is refused. */
export function isAddressAllowed(address: string, policy: boolean | AddressPolicy): boolean {
  const { allowPrivate, allowed } = toPolicy(policy);
  const parsed = parseAddress(address);
  if (!parsed) return false;
  if (allowPrivate || addressKind(parsed) === 'public') return true;
  return allowed.some((r) => {
    const range = parseAddressRange(r);
    return range !== undefined && range[0].kind() === parsed.kind() && parsed.match(range);
  });
}

export type AddressVerdict = { allowed: true; address: string } | { allowed: false; address: string };

/**
 * Pure: the SSRF guard's decision on what a name resolved to. Every answer must be allowed, not
 * only the first: the one a connection (or a proxy) ends up using is not ours to choose. An allowed
 * verdict names the address to connect to (the first answer); a refused one names the bad answer.
 */
export function vetAddresses(addresses: readonly string[], policy: boolean | AddressPolicy): AddressVerdict {
  if (addresses.length === 0) return { allowed: false, address: '(no address)' };
  const bad = addresses.find((a) => !isAddressAllowed(a, policy));
  return bad !== undefined ? { allowed: false, address: bad } : { allowed: true, address: addresses[0]! };
}

export class ForbiddenAddressError extends NonRetryableError {
  constructor(host: string, address: string) {
    super('ERR_FORBIDDEN_ADDRESS', `${host} resolves to ${address}, a private, loopback or link-local address (set allowPrivateAddresses or allowedAddresses to crawl it)`, { host, address });
  }
}

/** Checks a URL whose host is an IP literal (DNS lookup is never called for those). */
export function assertUrlAddressAllowed(url: URL, policy: boolean | AddressPolicy): void {
  const { allowPrivate } = toPolicy(policy);
  if (allowPrivate) return;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (ipaddr.isValid(host) && !isAddressAllowed(host, policy)) throw new ForbiddenAddressError(url.hostname, host);
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

/** Node's lookup, or one that answers the `overrides` (HOST_RESOLVE) itself and asks DNS for the rest. */
function resolverWith(overrides: ReadonlyMap<string, string>): Lookup {
  if (overrides.size === 0) return dnsLookup as unknown as Lookup;
  return (hostname, options, callback) => {
    const fixed = overrides.get(hostname.toLowerCase());
    if (!fixed) return dnsLookup(hostname, options, callback as never);
    const family = fixed.includes(':') ? 6 : 4;
    if ((options as { all?: boolean }).all) return callback(null, [{ address: fixed, family }]);
    callback(null, fixed, family);
  };
}

/**
 * `resolve` with the SSRF guard on its answers: every address a name resolves to is vetted
 * (vetAddresses), and a refused one fails the lookup with ERR_FORBIDDEN_ADDRESS, so no socket is
 * ever opened to it: not by us, and not by a proxy, which is handed the vetted address.
 */
export function guardLookup(resolve: Lookup, policy: boolean | AddressPolicy): Lookup {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (err, list) => {
      if (err) return callback(err, []);
      const answers = list as LookupAddress[];
      const verdict = vetAddresses(
        answers.map((a) => a.address),
        policy,
      );
      if (!verdict.allowed) return callback(Object.assign(new ForbiddenAddressError(hostname, verdict.address), { errno: undefined }), []);
      if ((options as { all?: boolean }).all) return callback(null, answers);
      callback(null, answers[0]!.address, answers[0]!.family);
    });
  };
}

/**
 * The fetcher's dns.lookup: names in `overrides` resolve to their given address, the rest through
 * DNS; and an answer the policy refuses fails the lookup, so a public name that resolves to
 * 10.0.0.1 (DNS rebinding) is refused at connect time, on the first request and on every redirect.
 * Returns undefined when Node's own lookup would do.
 */
export function makeLookup(overrides: ReadonlyMap<string, string>, policy: boolean | AddressPolicy): Lookup | undefined {
  const { allowPrivate } = toPolicy(policy);
  if (allowPrivate && overrides.size === 0) return undefined;
  const resolve = resolverWith(overrides);
  return allowPrivate ? resolve : guardLookup(resolve, policy);
}

/** The guarded lookup without overrides. */
export const guardedLookup: Lookup = makeLookup(new Map(), false)!;
