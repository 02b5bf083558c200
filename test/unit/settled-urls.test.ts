import { SettledUrls } from '@crawlfleet/crawl';
import type { Candidate } from '@crawlfleet/frontier';

const admit = (url: string): Candidate => ({ url, depth: 1, verdict: 'admit' });

describe('SettledUrls: links a parser need not offer to Redis again', () => {
  test('admitted and out-of-scope URLs are remembered per crawl run; too-deep ones are offered again', () => {
    const settled = new SettledUrls();
    const offered: Candidate[] = [admit('http://a.test/1'), { url: 'http://x.test/', depth: 1, verdict: 'out-of-scope' }, { url: 'http://a.test/deep', depth: 9, verdict: 'too-deep' }];
    expect(settled.unsettled('c@t1', offered)).toEqual(offered);
    settled.settle('c@t1', offered);
    expect(settled.unsettled('c@t1', [...offered, admit('http://a.test/2')]).map((c) => c.url)).toEqual(['http://a.test/deep', 'http://a.test/2']);
    // The same crawl id registered again after a reset is another run: nothing is known of it.
    expect(settled.unsettled('c@t2', offered)).toEqual(offered);
  });

  test('bounded: a full set starts again empty, and the oldest crawl run is forgotten past the limit of runs', () => {
    const settled = new SettledUrls(3, 2);
    settled.settle('a', [admit('u1'), admit('u2')]);
    settled.settle('a', [admit('u3'), admit('u4')]);
    expect(settled.unsettled('a', [admit('u1'), admit('u3'), admit('u4')]).map((c) => c.url)).toEqual(['u1']);
    settled.settle('b', [admit('v1')]);
    settled.settle('c', [admit('w1')]);
    expect(settled.unsettled('a', [admit('u3')])).toHaveLength(1);
    expect(settled.unsettled('c', [admit('w1')])).toHaveLength(0);
  });
});
