import { addressPolicy, assertUrlAddressAllowed, connectTarget, isAddressAllowed, isPublicAddress, makeLookup, vetAddresses } from '@crawlfleet/fetch';
import { validateSpider } from '@crawlfleet/core';

const GUARDED = addressPolicy({ allowPrivateAddresses: false });
const OPEN = addressPolicy({ allowPrivateAddresses: true });
/** what the SSRF e2e test allows: its loopback test site, and nothing else private */
const TEST_SITE = addressPolicy({ allowPrivateAddresses: false, allowedAddresses: ['127.0.0.1'] });
const INTRANET = addressPolicy({ allowPrivateAddresses: false, allowedAddresses: ['10.20.0.0/16', 'fd00:1::/32'] });

describe('the SSRF guard decides on addresses (pure)', () => {
  // address, kind, guarded, allowedAddresses ['127.0.0.1'], intranet ['10.20.0.0/16', 'fd00:1::/32']
  test.each([
    ['127.0.0.1', 'loopback', false, true, false],
    ['127.0.0.2', 'loopback', false, false, false],
    ['127.255.255.254', 'loopback', false, false, false],
    ['::1', 'IPv6 loopback', false, false, false],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback', false, true, false],
    ['10.0.0.1', 'private 10/8', false, false, false],
    ['10.20.3.4', 'private 10/8, the intranet', false, false, true],
    ['10.21.0.1', 'private 10/8, next to the intranet', false, false, false],
    ['172.16.0.1', 'private 172.16/12', false, false, false],
    ['172.31.255.255', 'private 172.16/12', false, false, false],
    ['192.168.1.1', 'private 192.168/16', false, false, false],
    ['169.254.1.1', 'link-local', false, false, false],
    ['169.254.169.254', 'cloud metadata', false, false, false],
    ['::ffff:169.254.169.254', 'IPv4-mapped metadata', false, false, false],
    ['fd00::1', 'IPv6 unique local', false, false, false],
    ['fd00:1::5', 'IPv6 unique local, the intranet', false, false, true],
    ['fe80::1', 'IPv6 link-local', false, false, false],
    ['0.0.0.0', 'unspecified', false, false, false],
    ['100.64.0.1', 'carrier-grade NAT', false, false, false],
    ['224.0.0.1', 'multicast', false, false, false],
    ['8.8.8.8', 'public', true, true, true],
    ['172.32.0.1', 'public, just past 172.16/12', true, true, true],
    ['11.0.0.1', 'public, just past 10/8', true, true, true],
    ['2606:4700:4700::1111', 'public IPv6', true, true, true],
    ['not-an-ip', 'not an address', false, false, false],
  ])('%s (%s): guarded %s, test site allowance %s, intranet allowance %s', (address, _kind, guarded, testSite, intranet) => {
    expect(isAddressAllowed(address, GUARDED)).toBe(guarded);
    expect(isAddressAllowed(address, TEST_SITE)).toBe(testSite);
    expect(isAddressAllowed(address, INTRANET)).toBe(intranet);
    expect(isAddressAllowed(address, OPEN)).toBe(address !== 'not-an-ip');
  });

  // Every special-purpose range of the IANA IPv4 and IPv6 registries (RFC 6890 and updates), one
  // sample address each, plus the cloud-internal addresses: none may be reached without leave.
  test.each([
    ['0.1.2.3', '0.0.0.0/8 "this network"'],
    ['10.1.2.3', '10/8 private'],
    ['100.64.0.1', '100.64/10 shared address space (carrier-grade NAT)'],
    ['100.127.255.254', '100.64/10, its last host'],
    ['127.0.0.1', '127/8 loopback'],
    ['169.254.0.1', '169.254/16 link-local'],
    ['172.16.0.1', '172.16/12 private'],
    ['192.0.0.1', '192.0.0.0/24 IETF protocol assignments'],
    ['192.0.0.9', '192.0.0.0/24 (PCP anycast)'],
    ['192.0.0.170', '192.0.0.0/24 (NAT64 discovery)'],
    ['192.0.2.1', '192.0.2.0/24 documentation (TEST-NET-1)'],
    ['192.31.196.1', '192.31.196.0/24 AS112'],
    ['192.52.193.1', '192.52.193.0/24 AMT'],
    ['192.88.99.1', '192.88.99.0/24 6to4 relay anycast'],
    ['192.168.0.1', '192.168/16 private'],
    ['192.175.48.1', '192.175.48.0/24 AS112 direct delegation'],
    ['198.18.0.1', '198.18/15 benchmarking'],
    ['198.19.255.254', '198.18/15, its last host'],
    ['198.51.100.1', '198.51.100.0/24 documentation (TEST-NET-2)'],
    ['203.0.113.1', '203.0.113.0/24 documentation (TEST-NET-3)'],
    ['224.0.0.1', '224/4 multicast'],
    ['239.255.255.250', '224/4 multicast (SSDP)'],
    ['240.0.0.1', '240/4 reserved'],
    ['255.255.255.255', 'limited broadcast'],
    ['169.254.169.254', 'cloud metadata (AWS, GCP, Azure, OCI)'],
    ['169.254.170.2', 'cloud metadata (AWS ECS)'],
    ['168.63.129.16', "Azure's WireServer, a public-looking address"],
    ['100.100.100.200', 'cloud metadata (Alibaba)'],
    ['::', '::/128 unspecified'],
    ['::1', '::1/128 loopback'],
    ['::7f00:1', '::/96 IPv4-compatible 127.0.0.1'],
    ['::127.0.0.1', '::/96 IPv4-compatible 127.0.0.1, dotted'],
    ['::8.8.8.8', '::/96 IPv4-compatible, deprecated even for a public IPv4'],
    ['::ffff:127.0.0.1', '::ffff:0:0/96 IPv4-mapped loopback'],
    ['::ffff:7f00:1', '::ffff:0:0/96 IPv4-mapped loopback, hex'],
    ['::ffff:168.63.129.16', '::ffff:0:0/96 IPv4-mapped WireServer'],
    ['::ffff:0:a00:1', '::ffff:0:0:0/96 IPv4-translated'],
    ['64:ff9b::7f00:1', '64:ff9b::/96 NAT64 of loopback'],
    ['64:ff9b::a9fe:a9fe', '64:ff9b::/96 NAT64 of the metadata address'],
    ['64:ff9b::c0a8:101', '64:ff9b::/96 NAT64 of 192.168.1.1'],
    ['64:ff9b:1::808:808', '64:ff9b:1::/48 local-use NAT64'],
    ['100::1', '100::/64 discard-only'],
    ['100:0:0:1::1', '100:0:0:1::/64 dummy prefix'],
    ['2001::1', '2001::/32 Teredo with private embedded addresses'],
    ['2001:0:4136:e378:8000:63bf:f5ff:fffe', '2001::/32 Teredo whose client is 10.0.0.1'],
    ['2001:1::1', '2001:1::1/128 PCP anycast, in 2001::/23'],
    ['2001:2::1', '2001:2::/48 benchmarking'],
    ['2001:3::1', '2001:3::/32 AMT'],
    ['2001:4:112::1', '2001:4:112::/48 AS112-v6'],
    ['2001:10::1', '2001:10::/28 ORCHID (deprecated)'],
    ['2001:20::1', '2001:20::/28 ORCHIDv2'],
    ['2001:30::1', '2001:30::/28 drone remote ID'],
    ['2001:db8::1', '2001:db8::/32 documentation'],
    ['2002:a00:1::1', '2002::/16 6to4 of 10.0.0.1'],
    ['2002:7f00:1::1', '2002::/16 6to4 of loopback'],
    ['2002:a9fe:a9fe::1', '2002::/16 6to4 of the metadata address'],
    ['2620:4f:8000::1', '2620:4f:8000::/48 AS112 direct delegation'],
    ['3fff::1', '3fff::/20 documentation'],
    ['5f00::1', '5f00::/16 segment routing SIDs'],
    ['fc00::1', 'fc00::/7 unique local'],
    ['fd00:ec2::254', 'AWS metadata over IPv6 (unique local)'],
    ['fe80::1', 'fe80::/10 link-local'],
    ['fec0::1', 'fec0::/10 site-local (deprecated)'],
    ['ff02::1', 'ff00::/8 multicast'],
    ['4000::1', 'outside 2000::/3, unallocated'],
  ])('%s (%s) is refused by the guard, allowed only with allowPrivateAddresses', (address) => {
    expect(isPublicAddress(address)).toBe(false);
    expect(isAddressAllowed(address, GUARDED)).toBe(false);
    expect(isAddressAllowed(address, OPEN)).toBe(true);
  });

  test.each([
    ['8.8.8.8', 'public IPv4'],
    ['1.1.1.1', 'public IPv4'],
    ['93.184.216.34', 'public IPv4'],
    ['100.63.255.255', 'public, just below 100.64/10'],
    ['100.128.0.1', 'public, just past 100.64/10'],
    ['168.63.129.15', "public, next to Azure's WireServer"],
    ['192.0.1.1', 'public, just past 192.0.0.0/24'],
    ['198.17.255.254', 'public, just below 198.18/15'],
    ['198.20.0.1', 'public, just past 198.18/15'],
    ['223.255.255.254', 'public, just below multicast'],
    ['2606:4700:4700::1111', 'public IPv6'],
    ['2a00:1450:4001:80b::200e', 'public IPv6'],
    ['2001:4860:4860::8888', 'public IPv6 in 2001::/16, outside 2001::/23'],
    ['::ffff:8.8.8.8', 'IPv4-mapped public'],
    ['64:ff9b::808:808', 'NAT64 of a public IPv4'],
    ['2002:808:808::1', '6to4 of a public IPv4'],
    ['2001:0:808:808:0:f7f7:f7f7:f7f7', 'Teredo, server 8.8.8.8 and client 8.8.8.8'],
  ])('%s (%s) stays allowed', (address) => {
    expect(isPublicAddress(address)).toBe(true);
    expect(isAddressAllowed(address, GUARDED)).toBe(true);
  });

  test('a URL whose host is a special address is refused before any lookup: [::7f00:1], [64:ff9b::a9fe:a9fe], 168.63.129.16', () => {
    for (const url of ['http://[::7f00:1]:8080/', 'http://[64:ff9b::a9fe:a9fe]/latest/meta-data/', 'http://168.63.129.16/machine?comp=goalstate', 'http://[2002:a00:1::1]/']) {
      expect(() => assertUrlAddressAllowed(new URL(url), GUARDED)).toThrow(expect.objectContaining({ code: 'ERR_FORBIDDEN_ADDRESS' }));
    }
  });

  test('every answer of a name must pass, and the one refused is named; an allowed verdict names the address to connect to', () => {
    expect(vetAddresses(['8.8.8.8', '1.1.1.1'], GUARDED)).toEqual({ allowed: true, address: '8.8.8.8' });
    expect(vetAddresses(['8.8.8.8', '169.254.169.254'], GUARDED)).toEqual({ allowed: false, address: '169.254.169.254' });
    expect(vetAddresses(['127.0.0.1', '127.0.0.2'], TEST_SITE)).toEqual({ allowed: false, address: '127.0.0.2' });
    expect(vetAddresses([], OPEN)).toEqual({ allowed: false, address: '(no address)' });
  });

  test('the CONNECT target is the vetted address (IPv6 in brackets), or the name only when the proxy resolves names', () => {
    expect(connectTarget('shop.example', 443, '93.184.216.34', false)).toBe('93.184.216.34:443');
    expect(connectTarget('shop.example', 80, '2606:4700::1', false)).toBe('[2606:4700::1]:80');
    expect(connectTarget('shop.example', 443, '93.184.216.34', true)).toBe('shop.example:443');
    expect(connectTarget('2606:4700::1', 443, undefined, true)).toBe('[2606:4700::1]:443');
  });

  test('the guarded lookup applies HOST_RESOLVE and the policy: a name resolving to the metadata address fails before any socket', async () => {
    const overrides = new Map([
      ['metadata.test', '169.254.169.254'],
      ['site.test', '127.0.0.1'],
    ]);
    const resolve = (name: string, policy: Parameters<typeof makeLookup>[1]) =>
      new Promise<string>((ok, fail) => makeLookup(overrides, policy)!(name, {}, (err, address) => (err ? fail(err) : ok(address as string))));
    await expect(resolve('metadata.test', TEST_SITE)).rejects.toMatchObject({ code: 'ERR_FORBIDDEN_ADDRESS', message: expect.stringContaining('169.254.169.254') });
    await expect(resolve('site.test', TEST_SITE)).resolves.toBe('127.0.0.1');
    await expect(resolve('site.test', GUARDED)).rejects.toMatchObject({ code: 'ERR_FORBIDDEN_ADDRESS' });
    await expect(resolve('metadata.test', OPEN)).resolves.toBe('169.254.169.254');
  });

  test('allowedAddresses and proxies.resolveNames in a spider: checked, with defaults', () => {
    const spider = validateSpider({ name: 'x', startUrls: ['http://a.com/'] });
    expect(spider.allowedAddresses).toEqual([]);
    expect(spider.proxies.resolveNames).toBe(false);
    expect(validateSpider({ name: 'x', allowedAddresses: ['10.0.0.0/8', '127.0.0.1', 'fd00::/8'] }).allowedAddresses).toHaveLength(3);
    for (const bad of ['10.0.0.0/33', 'intranet', '10.0.0.1/8/1', 'fd00::/129']) {
      expect(() => validateSpider({ name: 'x', allowedAddresses: [bad] }, 'my.json')).toThrow(
        expect.objectContaining({ issues: [expect.stringMatching(/^my\.json: allowedAddresses\[0\]: must be an IP address or a CIDR range/)] }),
      );
    }
  });
});
