import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { ConfigError } from '@crawlfleet/core';

/** Pure: does this bind address keep the dashboard on this machine? */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  return isIP(h) === 4 && h.startsWith('127.');
}

export interface Credentials {
  user: string;
  password: string;
}

/**
 * Pure: the dashboard's access rule. With DASHBOARD_USER and DASHBOARD_PASSWORD, every page asks for
 * them (HTTP basic auth); without, it may bind to loopback only. Returns the credentials, or none.
 */
export function dashboardAccess(host: string, user: string, password: string): Credentials | undefined {
  if ((user === '') !== (password === '')) throw new ConfigError('dashboard: set both DASHBOARD_USER and DASHBOARD_PASSWORD, or neither', { file: 'environment' });
  if (user !== '') return { user, password };
  if (!isLoopbackHost(host)) {
    throw new ConfigError(`dashboard: refusing to serve ${host} without DASHBOARD_USER and DASHBOARD_PASSWORD (Bull Board can retry and remove jobs); bind 127.0.0.1, or set both`, {
      file: 'environment',
    });
  }
  return undefined;
}

/** Compares two equal-length buffers; the tests pass one that records what it was given. */
export type BufferCompare = (a: Buffer, b: Buffer) => boolean;
const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/**
 * Pure: does an Authorization header carry these credentials? The SHA-256 digests are compared in
 * constant time, the user's and the password's both, always: what it costs says nothing of either
 * length, nor of which one was wrong.
 */
export function authorized(header: string | undefined, expected: Credentials, compare: BufferCompare = timingSafeEqual): boolean {
  // Read without a regular expression: a backtracking match over a long header can exhaust the stack.
  const text = (header ?? '').trim();
  const space = text.search(/\s/);
  if (space < 0 || text.slice(0, space).toLowerCase() !== 'basic') return false;
  const decoded = Buffer.from(text.slice(space + 1).trim(), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return false;
  const userOk = compare(digest(decoded.slice(0, colon)), digest(expected.user));
  const passwordOk = compare(digest(decoded.slice(colon + 1)), digest(expected.password));
  return userOk && passwordOk;
}
