import { addressPolicy, connectTarget, isAddressAllowed, makeLookup, vetAddresses } from '@crawlfleet/fetch';
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
