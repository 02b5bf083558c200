// The fetch job's decisions (pure), each a step of services/fetcher/src/fetch-job.ts: where a page is
// rendered, the request, a failed proxy, the host's report, the verdict's step, a redirect's target.
import { hostAfterPage } from '../../services/fetcher/src/answer.js';
import { proxyToGoAround } from '../../services/fetcher/src/no-page.js';
import { redirectStep } from '../../services/fetcher/src/redirect.js';
import { renderRoute } from '../../services/fetcher/src/render-route.js';
import { withConditions } from '../../services/fetcher/src/request.js';
import { responseStep } from '../../services/fetcher/src/verdict.js';

describe('the fetch job, step by step: its pure decisions', () => {
  test("route: a fetcher sends `always` to the render queue, asks its kind's stats in `auto`, fetches `never` plainly; a renderer loads all", () => {
    expect(renderRoute(false, 'always')).toBe('render');
    expect(renderRoute(false, 'auto')).toBe('auto');
    expect(renderRoute(false, 'never')).toBe('plain');
    expect(renderRoute(true, 'always')).toBe('plain');
    expect(renderRoute(true, 'auto')).toBe('plain');
    expect(renderRoute(true, 'never')).toBe('plain');
  });

  test("build the request: a recrawl's conditions go over the hook's request, a GET when there is none", () => {
    const conditional = { 'if-none-match': '"v1"' };
    expect(withConditions(undefined, {})).toBeUndefined();
    const hooked = { method: 'POST' as const, headers: { 'x-a': '1', 'if-none-match': '"old"' }, body: 'q=1' };
    expect(withConditions(hooked, {})).toBe(hooked);
    expect(withConditions(undefined, conditional)).toEqual({ method: 'GET', headers: { 'if-none-match': '"v1"' } });
    expect(withConditions(hooked, conditional)).toEqual({ method: 'POST', body: 'q=1', headers: { 'x-a': '1', 'if-none-match': '"v1"' } });
    expect(withConditions({ method: 'GET', headers: { 'x-a': '1' } }, conditional)).toEqual({ method: 'GET', headers: { 'x-a': '1', 'if-none-match': '"v1"' } });
  });

  test('a failed request goes around its proxy only when the proxy failed, until every proxy was tried once', () => {
    const proxy = { id: 'p1', label: 'proxy-1' };
    expect(proxyToGoAround({ proxyFault: true, proxy }, [], 3)).toBe(proxy);
    expect(proxyToGoAround({ proxyFault: true, proxy }, ['p0', 'p2'], 3)).toBe(proxy);
    expect(proxyToGoAround({ proxyFault: true, proxy }, ['p0', 'p2', 'p3'], 3)).toBeUndefined();
    expect(proxyToGoAround({ proxyFault: false, proxy }, [], 3)).toBeUndefined();
    expect(proxyToGoAround({ proxyFault: true, proxy: undefined }, [], 3)).toBeUndefined();
    expect(proxyToGoAround({ proxyFault: true, proxy }, [], 0)).toBeUndefined();
  });

  test("a rendered page's requests to its own host push the host's next turn that many delays later", () => {
    const host = { concurrency: 2, delayMs: 500, startedAt: 10_000 };
    expect(hostAfterPage(host, undefined)).toBe(host);
    expect(hostAfterPage(host, 0)).toBe(host);
    expect(hostAfterPage(host, 3)).toEqual({ concurrency: 2, delayMs: 500, startedAt: 11_500 });
    expect(hostAfterPage({ ...host, holdUntil: 20_000 }, 1)).toEqual({ concurrency: 2, delayMs: 500, startedAt: 10_500, holdUntil: 20_000 });
  });

  test("classify: a recrawl's 304 first, then the verdict; a retry status on the last attempt gives up", () => {
    const facts = { status: 200, recrawls: false, known: false, isLastAttempt: false };
    const blocked = { kind: 'blocked' as const, reason: 'blocked: HTTP 403', signal: 'http-403' };
    expect(responseStep({ kind: 'ok' }, facts)).toEqual({ kind: 'ok' });
    expect(responseStep(blocked, { ...facts, status: 403 })).toEqual({ kind: 'blocked', reason: 'blocked: HTTP 403' });
    expect(responseStep(blocked, { ...facts, status: 403, isLastAttempt: true })).toEqual({ kind: 'blocked', reason: 'blocked: HTTP 403' });
    expect(responseStep({ kind: 'redirect', location: 'http://b.test/' }, { ...facts, status: 301 })).toEqual({ kind: 'redirect', location: 'http://b.test/' });
    expect(responseStep({ kind: 'retry', reason: 'HTTP 503' }, { ...facts, status: 503 })).toEqual({ kind: 'retry', reason: 'HTTP 503' });
    expect(responseStep({ kind: 'retry', reason: 'HTTP 503' }, { ...facts, status: 503, isLastAttempt: true })).toEqual({ kind: 'giveUp', reason: 'HTTP 503' });
    expect(responseStep({ kind: 'fail', reason: 'HTTP 404' }, { ...facts, status: 404 })).toEqual({ kind: 'giveUp', reason: 'HTTP 404' });
    // a 304: the page as it was only for a recrawl that knows the URL's last visit
    const fail304 = { kind: 'fail' as const, reason: 'HTTP 304' };
    expect(responseStep(fail304, { ...facts, status: 304, recrawls: true, known: true })).toEqual({ kind: 'notModified' });
    expect(responseStep(blocked, { ...facts, status: 304, recrawls: true, known: true, isLastAttempt: true })).toEqual({ kind: 'notModified' });
    expect(responseStep(fail304, { ...facts, status: 304, recrawls: true, known: false })).toEqual({ kind: 'giveUp', reason: 'HTTP 304' });
    expect(responseStep(fail304, { ...facts, status: 304, recrawls: false, known: true })).toEqual({ kind: 'giveUp', reason: 'HTTP 304' });
    expect(responseStep({ kind: 'ok' }, { ...facts, status: 200, recrawls: true, known: true })).toEqual({ kind: 'ok' });
  });

  test('a redirect to another origin: its canonical target with every redirect counted, or a give-up past the limit or off http(s)', () => {
    expect(redirectStep('HTTP://B.test:80/a/../b#top', undefined, 0, 5)).toEqual({ kind: 'follow', target: 'http://b.test/b', redirects: 1 });
    expect(redirectStep('https://b.test/', 2, 1, 5)).toEqual({ kind: 'follow', target: 'https://b.test/', redirects: 4 });
    expect(redirectStep('https://b.test/', 3, 1, 5)).toEqual({ kind: 'follow', target: 'https://b.test/', redirects: 5 });
    expect(redirectStep('https://b.test/', 4, 1, 5)).toEqual({ kind: 'tooMany', redirects: 6 });
    expect(redirectStep('ftp://b.test/file', 0, 0, 5)).toEqual({ kind: 'notHttp' });
    expect(redirectStep('not a url', 0, 0, 5)).toEqual({ kind: 'notHttp' });
    // past the limit first, whatever the target
    expect(redirectStep('ftp://b.test/file', 0, 0, 0)).toEqual({ kind: 'tooMany', redirects: 1 });
  });
});
