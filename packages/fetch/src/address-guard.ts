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

/**
 * A dns.lookup that refuses private answers, so a public name that resolves to 10.0.0.1 (DNS
 * rebinding) is refused at connect time, on the first request and on every redirect.
 */
export function guardedLookup(hostname: string, options: object, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const list = addresses as LookupAddress[];
    const bad = list.find((a) => !isPublicAddress(a.address));
    if (bad) return callback(Object.assign(new ForbiddenAddressError(hostname, bad.address), { errno: undefined }), []);
    if ((options as { all?: boolean }).all) return callback(null, list);
    callback(null, list[0]!.address, list[0]!.family);
  });
}
