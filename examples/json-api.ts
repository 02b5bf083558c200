/**
 * The JSON API spider of examples/json-api.json written as code: the parse hook reads each response
 * with page.json() and yields the same items and links. The API is the one
 * `node test/fixtures/serve.mjs json-api 8080` serves.
 */
import { defineSpider, follow, z } from '@crawlfleet/sdk';

interface Product {
  id: number;
  name: string;
  price?: number;
  currency: string;
  tags: string[];
  stock: { count: number; warehouse: string };
  related: number[];
}

interface ProductList {
  page: number;
  items: Array<{ id: number; name: string; price?: number }>;
  next: string | null;
}

const DETAIL = /\/api\/products\/\d+$/;

export default defineSpider({
  name: 'json-api',
  startUrls: ['http://127.0.0.1:8080/api/products?page=1'],
  allowedDomains: ['127.0.0.1:8080'],
  obeyRobotsTxt: false,
  allowPrivateAddresses: true,
  itemKeys: { product: 'id', listing: 'id' },
  // A product without a price is counted invalid, as the declarative spider's `required` does.
  schemas: { product: z.looseObject({ id: z.number().int(), price: z.number() }) },
  *parse(page) {
    if (DETAIL.test(page.url)) {
      const p = page.json<Product>();
      yield { type: 'product', id: p.id, name: p.name, price: p.price ?? null, currency: p.currency, tags: p.tags, stock: p.stock.count, warehouse: p.stock.warehouse };
      for (const id of p.related) yield follow(`/api/products/${id}`);
      return;
    }
    const list = page.json<ProductList>();
    for (const item of list.items) {
      yield { type: 'listing', id: item.id, name: item.name, price: item.price ?? null };
      yield follow(`/api/products/${item.id}`);
    }
    if (list.next) yield follow(list.next);
  },
});
