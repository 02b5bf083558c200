import { charsetOf, decodeHtml, sniffEncoding } from '@crawlfleet/fetch';

// Bytes written out by hand (from Python's codecs), so the test does not trust the decoder's own encoder.
const hex = (h: string) => Buffer.from(h.replace(/\s+/g, ''), 'hex');
const GBK_WEILAI = hex('ceb4c0b4cdf8'); // 未来网
const SJIS_PAGE = hex('93fa967b8cea82cc8379815b8357'); // 日本語のページ
const CP1251_PRIVET = hex('cff0e8e2e5f2'); // Привет
const GB2312_ZHONGWEN = hex('d6d0cec4'); // 中文
const html = (head: string, title: Buffer) => Buffer.concat([Buffer.from(`<!doctype html><html><head>${head}<title>`), title, Buffer.from('</title></head><body>x</body></html>')]);
const titleOf = (text: string) => /<title>(.*)<\/title>/.exec(text)?.[1];

describe('charset sniffing, in the WHATWG order', () => {
  test.each([
    ['<meta charset="gbk">', GBK_WEILAI, 'text/html', '未来网', 'GBK', 'meta'],
    ['<meta charset=gb2312>', GB2312_ZHONGWEN, 'text/html', '中文', 'GBK', 'meta'],
    ['<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">', CP1251_PRIVET, 'text/html', 'Привет', 'windows-1251', 'meta'],
    ['<meta charset="Shift_JIS">', SJIS_PAGE, 'text/html', '日本語のページ', 'Shift_JIS', 'meta'],
    // ISO-8859-1 means windows-1252 on the web: 0x80 is the euro sign.
    ['<meta charset="iso-8859-1">', hex('636166e92080'), 'text/html', 'café €', 'windows-1252', 'meta'],
    // The header beats the meta.
    ['<meta charset="windows-1251">', GBK_WEILAI, 'text/html; charset=GBK', '未来网', 'GBK', 'header'],
    ['<meta charset="utf-8">', CP1251_PRIVET, 'text/html;charset="windows-1251"', 'Привет', 'windows-1251', 'header'],
    // A label the Encoding Standard does not know is skipped: the meta decides.
    ['<meta charset="gbk">', GBK_WEILAI, 'text/html; charset=no-such-charset', '未来网', 'GBK', 'meta'],
  ])('%s served as %s', (head, title, contentType, expected, encoding, source) => {
    const body = html(head, title as Buffer);
    expect(sniffEncoding(body, contentType as string)).toEqual({ encoding, source });
    expect(titleOf(decodeHtml(body, contentType as string))).toBe(expected);
  });

  test('a byte-order mark beats the header and the meta', () => {
    const page = '<html><head><meta charset="windows-1251"><title>日本語 – ok</title></head></html>';
    const utf16le = Buffer.concat([hex('fffe'), Buffer.from(page, 'utf16le')]);
    expect(sniffEncoding(utf16le, 'text/html; charset=iso-8859-1')).toEqual({ encoding: 'UTF-16LE', source: 'bom' });
    expect(titleOf(decodeHtml(utf16le, 'text/html; charset=iso-8859-1'))).toBe('日本語 – ok');
    const utf16be = Buffer.concat([hex('feff'), Buffer.from(page, 'utf16le').swap16()]);
    expect(titleOf(decodeHtml(utf16be, 'text/html'))).toBe('日本語 – ok');
    const utf8 = Buffer.concat([hex('efbbbf'), Buffer.from(page)]);
    expect(sniffEncoding(utf8, 'text/html; charset=windows-1251')).toEqual({ encoding: 'UTF-8', source: 'bom' });
    expect(decodeHtml(utf8, 'text/html').startsWith('<html>')).toBe(true);
  });

  test('a meta declaring UTF-16 in an ASCII-compatible page means UTF-8 (the spec), and a meta past 1024 bytes still counts', () => {
    const body = html('<meta charset="utf-16">', Buffer.from('naïve'));
    expect(sniffEncoding(body, 'text/html')).toEqual({ encoding: 'UTF-8', source: 'meta' });
    const late = html(`<script>${' '.repeat(3000)}</script><meta charset="gbk">`, GBK_WEILAI);
    expect(sniffEncoding(late, 'text/html')).toEqual({ encoding: 'GBK', source: 'late-meta' });
    expect(titleOf(decodeHtml(late, 'text/html'))).toBe('未来网');
  });

  test('an undeclared page is UTF-8 when its bytes are valid UTF-8, else windows-1252', () => {
    expect(sniffEncoding(Buffer.from('<p>未来网</p>'), 'text/html')).toEqual({ encoding: 'UTF-8', source: 'utf8' });
    expect(sniffEncoding(hex('3c703e636166e93c2f703e'), 'text/html')).toEqual({ encoding: 'windows-1252', source: 'default' });
    expect(decodeHtml(hex('3c703e636166e93c2f703e'), undefined)).toBe('<p>café</p>');
  });

  test('the charset parameter of a Content-Type', () => {
    expect(charsetOf('text/html; charset=UTF-8')).toBe('UTF-8');
    expect(charsetOf('text/html;charset="gbk" ; foo=bar')).toBe('gbk');
    expect(charsetOf('text/html')).toBeUndefined();
    expect(charsetOf(undefined)).toBeUndefined();
    expect(charsetOf('text/html; charset=')).toBeUndefined();
  });
});
