import { NonRetryableError, RetryableError } from '@crawlfleet/core';
import { ForbiddenAddressError, requestError, requestLimits } from '@crawlfleet/fetch';

describe("fetchPage's pure steps", () => {
  const limits = { maxResponseBytes: 10_000, timeoutMs: 5000, maxRedirects: 3 };

  test("requestLimits: the spider's limits, the size cap lowered to the caller's and never raised", () => {
    expect(requestLimits(limits, undefined)).toBe(limits);
    expect(requestLimits(limits, 0)).toBe(limits);
    expect(requestLimits(limits, 4000)).toEqual({ maxResponseBytes: 4000, timeoutMs: 5000, maxRedirects: 3 });
    expect(requestLimits(limits, 50_000)).toEqual({ maxResponseBytes: 10_000, timeoutMs: 5000, maxRedirects: 3 });
  });

  const url = 'http://site.test/a';

  test('requestError: our own errors pass through as they are, even over the cap', () => {
    const retry = new RetryableError('ERR_X', 'x');
    const permanent = new NonRetryableError('ERR_Y', 'y');
    expect(requestError(retry, true, 100, url)).toBe(retry);
    expect(requestError(permanent, false, 100, url)).toBe(permanent);
  });

  test('requestError: a body over the cap is ERR_RESPONSE_TOO_LARGE, whatever got said', () => {
    const cancel = Object.assign(new Error('Promise was canceled'), { code: 'ERR_CANCELED' });
    const err = requestError(cancel, true, 100, url);
    expect(err).toBeInstanceOf(NonRetryableError);
    expect(err).toMatchObject({ code: 'ERR_RESPONSE_TOO_LARGE', message: 'response larger than 100 bytes', context: { url }, cause: cancel });
  });

  test("requestError: the SSRF guard's refusal, found up to four causes deep, is thrown as it is", () => {
    const forbidden = new ForbiddenAddressError('site.test', '127.0.0.1');
    expect(requestError(forbidden, false, 100, url)).toBe(forbidden);
    const wrapped = new Error('a', { cause: new Error('b', { cause: new Error('c', { cause: new Error('d', { cause: forbidden }) }) }) });
    expect(requestError(wrapped, false, 100, url)).toBe(forbidden);
    const tooDeep = new Error('a', { cause: wrapped });
    expect(requestError(tooDeep, false, 100, url)).toMatchObject({ code: 'ERR_UNKNOWN', message: 'ERR_UNKNOWN: a' });
  });

  test.each(['ERR_TOO_MANY_REDIRECTS', 'ENOTFOUND', 'ERR_INVALID_URL', 'ERR_UNSUPPORTED_PROTOCOL'])('requestError: %s is not retried', (code) => {
    const cause = Object.assign(new Error('boom'), { code });
    const err = requestError(cause, false, 100, url);
    expect(err).toBeInstanceOf(NonRetryableError);
    expect(err).toMatchObject({ code, message: `${code}: boom`, context: { url }, cause });
  });

  test.each(['ETIMEDOUT', 'ECONNRESET', 'ECONNREFUSED', 'ERR_BODY_PARSE_FAILURE'])('requestError: %s may succeed on another attempt', (code) => {
    const cause = Object.assign(new Error('boom'), { code });
    const err = requestError(cause, false, 100, url);
    expect(err).toBeInstanceOf(RetryableError);
    expect(err).toMatchObject({ code, message: `${code}: boom`, context: { url }, cause });
  });

  test('requestError: an error without a code is ERR_UNKNOWN and retried', () => {
    const cause = new Error('odd');
    const err = requestError(cause, false, 100, url);
    expect(err).toBeInstanceOf(RetryableError);
    expect(err).toMatchObject({ code: 'ERR_UNKNOWN', message: 'ERR_UNKNOWN: odd', cause });
  });
});
