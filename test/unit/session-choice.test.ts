import { validateSpider } from '@crawlfleet/core';
import { chooseSession, DEFAULT_SESSION_LIMITS, expiryOf, sessionLimits, type SessionRecord } from '@crawlfleet/politeness';

const limits = { maxPerHost: 3, maxAgeMs: 60_000, maxUses: 10 };
const session = (id: string, proxy: string, fields: Partial<SessionRecord> = {}): SessionRecord => ({ id, proxy, profile: 'chrome-linux', createdAt: 0, uses: 0, lastUsedAt: 0, ...fields });

describe('a session retires by its age and its uses (pure)', () => {
  test.each([
    [{ createdAt: 0, uses: 0 }, 59_999, undefined],
    [{ createdAt: 0, uses: 0 }, 60_000, 'age'],
    [{ createdAt: 0, uses: 9 }, 1, undefined],
    [{ createdAt: 0, uses: 10 }, 1, 'uses'],
    [{ createdAt: 0, uses: 10 }, 60_000, 'age'],
  ])('%o at %i ms: %s', (fields, now, reason) => {
    expect(expiryOf(session('s', 'p1', fields), now, limits)).toBe(reason);
  });

  test("the defaults are bounded, and a spider's `sessions` defaults to them", () => {
    expect(DEFAULT_SESSION_LIMITS).toEqual({ maxPerHost: 8, maxAgeMs: 1_800_000, maxUses: 100 });
    const spider = validateSpider({ name: 's', startUrls: ['https://shop.test/'] });
    expect(spider.sessions).toEqual({ enabled: true, ...DEFAULT_SESSION_LIMITS });
    expect(sessionLimits(validateSpider({ name: 's', sessions: { maxUses: 5 } }))).toEqual({ ...DEFAULT_SESSION_LIMITS, maxUses: 5 });
    expect(() => validateSpider({ name: 's', sessions: { maxPerHost: 0 } }, 'shop.json')).toThrow('shop.json: sessions.maxPerHost');
    expect(() => validateSpider({ name: 's', sessions: { cookies: false } }, 'shop.json')).toThrow('shop.json: sessions');
  });
});

describe("a request takes the host's session on its proxy (pure)", () => {
  test('a host with no session begins one', () => {
    expect(chooseSession([], 'p1', 0, limits)).toEqual({ kind: 'create', retire: [] });
  });

  test("the proxy's least used session is reused; another proxy's is not", () => {
    const sessions = [session('a', 'p1', { uses: 5 }), session('b', 'p1', { uses: 2 }), session('c', 'p2', { uses: 0 })];
    expect(chooseSession(sessions, 'p1', 1, limits)).toEqual({ kind: 'reuse', session: sessions[1], retire: [] });
    expect(chooseSession(sessions, '', 1, { ...limits, maxPerHost: 4 })).toEqual({ kind: 'create', retire: [] });
  });

  test('expired sessions retire, and the request then begins a new one', () => {
    const sessions = [session('old', 'p1', { createdAt: 0 }), session('worn', 'p1', { createdAt: 50_000, uses: 10 })];
    expect(chooseSession(sessions, 'p1', 60_000, limits)).toEqual({
      kind: 'create',
      retire: [
        { id: 'old', reason: 'age' },
        { id: 'worn', reason: 'uses' },
      ],
    });
  });

  test('a host at its maximum makes room by retiring its least recently used session', () => {
    const sessions = [session('a', 'p1', { lastUsedAt: 30 }), session('b', 'p2', { lastUsedAt: 10 }), session('c', 'p3', { lastUsedAt: 20 })];
    expect(chooseSession(sessions, 'p4', 40, limits)).toEqual({ kind: 'create', retire: [{ id: 'b', reason: 'room' }] });
    // a lowered maximum retires as many as it takes
    expect(chooseSession(sessions, 'p4', 40, { ...limits, maxPerHost: 1 })).toEqual({
      kind: 'create',
      retire: [
        { id: 'b', reason: 'room' },
        { id: 'c', reason: 'room' },
        { id: 'a', reason: 'room' },
      ],
    });
  });
});
