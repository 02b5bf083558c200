import { ConfigError, loadEnv, placeholderSecrets } from '@crawlfleet/core';

test("an example's replace-me in a credential is refused at start, naming each variable", () => {
  expect(placeholderSecrets({ DASHBOARD_PASSWORD: 'replace-me', REDIS_URL: 'redis://:Replace-Me@redis:6379', MONGO_URL: 'mongodb://m/db' })).toEqual([
    'REDIS_URL: still the example\'s placeholder "replace-me"; set a real value',
    'DASHBOARD_PASSWORD: still the example\'s placeholder "replace-me"; set a real value',
  ]);
  expect(() => loadEnv({ DASHBOARD_PASSWORD: 'replace-me' })).toThrow(ConfigError);
  expect(() => loadEnv({ DASHBOARD_PASSWORD: 'replace-me' })).toThrow(/DASHBOARD_PASSWORD: still the example's placeholder/);
  expect(() => loadEnv({ PROXY_LIST: 'http://u:replace-me@proxy:3128' })).toThrow(/PROXY_LIST/);
  expect(loadEnv({ DASHBOARD_PASSWORD: 'a-real-one' }).dashboardPassword).toBe('a-real-one');
});
