import ipaddr from 'ipaddr.js';

/**
 * What kind of address an IP is, for the SSRF guard: `public` for an address a crawl may reach
 * without leave, or the name of the special-purpose range that holds it.
 *
 * The ranges are the IANA IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890 and its
 * updates), as ipaddr.js names them, with what ipaddr.js leaves to us:
 * - IPv6 outside 2000::/3 is refused whatever ipaddr.js calls it: global unicast is allocated only
 *   from 2000::/3, and the rest is reserved or special (the IPv4-compatible ::/96, where
 *   `::7f00:1` is 127.0.0.1 for a host that routes it, the dummy prefix 100:0:0:1::/64, ...).
 * - An IPv6 address that carries an IPv4 address (IPv4-mapped ::ffff:0:0/96, NAT64 64:ff9b::/96,
 *   6to4 2002::/16, Teredo 2001::/32) is what its IPv4 address is: a translator or relay delivers
 *   to it. The local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215) is refused: it reaches whatever
 *   the operator's translator maps it to.
 * - Cloud services on public-looking or odd addresses, reachable from inside a VM only (metadata,
 *   Azure's WireServer): `cloudInternal`.
 * - Special ranges the registries call globally reachable (AS112, AMT, the anycast addresses in
 *   192.0.0.0/24) stay refused: no site lives there, so refusing them costs nothing.
 */
export type AddressKind = 'public' | string;

/** Cloud-internal addresses (instance metadata, Azure's WireServer), refused even where their range is public. */
const CLOUD_INTERNAL: readonly [string, string][] = [
  ['169.254.169.254/32', 'AWS, GCP, Azure, OCI, DigitalOcean instance metadata'],
  ['169.254.170.2/32', 'AWS ECS task metadata'],
  ['168.63.129.16/32', "Azure's WireServer (agent, DNS, health probes): a public address, answered inside Azure only"],
  ['100.100.100.200/32', 'Alibaba Cloud instance metadata'],
  ['192.0.0.192/32', 'Oracle Cloud instance metadata (legacy)'],
  ['fd00:ec2::254/128', 'AWS instance metadata over IPv6'],
];
const CLOUD_RANGES = CLOUD_INTERNAL.map(([cidr]) => ipaddr.parseCIDR(cidr));

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');
const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96');

/** Pure: the kind of a parsed address (see AddressKind). */
export function addressKind(address: ipaddr.IPv4 | ipaddr.IPv6): AddressKind {
  if (CLOUD_RANGES.some(([range, bits]) => range.kind() === address.kind() && address.match(range, bits))) return 'cloudInternal';
  if (address.kind() === 'ipv4') return ipv4Kind(address as ipaddr.IPv4);
  return ipv6Kind(address as ipaddr.IPv6);
}

function ipv4Kind(address: ipaddr.IPv4): AddressKind {
  const range = address.range();
  return range === 'unicast' ? 'public' : range;
}

function ipv6Kind(address: ipaddr.IPv6): AddressKind {
  const embedded = embeddedIPv4(address);
  if (embedded !== undefined) {
    const kinds = embedded.map((v4) => addressKind(v4));
    const refused = kinds.find((k) => k !== 'public');
    return refused === undefined ? 'public' : `${address.range()} of ${refused}`;
  }
  if (!address.match(GLOBAL_UNICAST_V6)) return address.range() === 'unicast' ? 'reserved' : address.range();
  const range = address.range();
  return range === 'unicast' ? 'public' : range;
}

/**
 * Pure: the IPv4 addresses an IPv6 address delivers to, when it is one of the forms that carry
 * one (RFC 4291 mapped, RFC 6052 NAT64 with the well-known prefix, RFC 3056 6to4, RFC 4380 Teredo:
 * its server and its client, whose address is stored inverted); undefined for any other address.
 */
export function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4[] | undefined {
  const p = address.parts;
  const v4 = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  switch (address.range()) {
    case 'ipv4Mapped':
      return [v4(p[6]!, p[7]!)];
    case 'rfc6052':
      return address.match(NAT64_WELL_KNOWN) ? [v4(p[6]!, p[7]!)] : undefined;
    case '6to4':
      return [v4(p[1]!, p[2]!)];
    case 'teredo':
      return [v4(p[2]!, p[3]!), v4(p[6]! ^ 0xffff, p[7]! ^ 0xffff)];
    default:
      return undefined;
  }
}
