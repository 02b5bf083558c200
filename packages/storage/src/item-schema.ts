import { createHash } from 'node:crypto';
import mongoose, { Schema, type SchemaDefinitionProperty, type SchemaType } from 'mongoose';
import { NonRetryableError, type FieldRule, type Item, type ItemRule } from '@crawlfleet/core';

/**
 * The fields the extractor sets on every item, as the store keeps them. `fetchedAt` stays the ISO
 * string the fetcher wrote (not a Date), so an export gives back exactly what the crawl produced.
 */
const ITEM_FIELDS = {
  type: { type: String },
  url: { type: String },
  spider: { type: String },
  crawlId: { type: String },
  fetchedAt: { type: String },
} satisfies Record<string, SchemaDefinitionProperty>;

/**
 * What the store adds to each document. `_id` is the item's key value (see `documentId`): a string,
 * a number or, for any other key value, its JSON; so it is Mixed, and mongoose casts it to nothing.
 */
const BOOKKEEPING = {
  _id: { type: Schema.Types.Mixed },
  firstSeenAt: { type: Date },
  lastSeenAt: { type: Date },
  changedAt: { type: Date },
  changes: { type: Number },
  contentHash: { type: String },
} satisfies Record<string, SchemaDefinitionProperty>;

/** Names the store uses for its own bookkeeping: an item never carries them. */
export const STORE_FIELDS: ReadonlySet<string> = new Set(Object.keys(BOOKKEEPING));

const castNumber = Schema.Types.Number.cast() as (value: unknown) => number | null | undefined;

/**
 * An `integer` field: mongoose's Number cast, then only whole numbers. Not `Schema.Types.Int32`: it
 * refuses integers beyond ±2^31, which the extractor gives for `integer` fields (`Math.trunc` of any
 * finite number, say a 10-digit product id); and the driver already stores a whole number in int32
 * range as a BSON int32, so Int32 would store nothing differently (checked on FerretDB 1.24.2).
 * A cast rather than a validator: validators run only when a Document is validated (or an update
 * with `runValidators`); a cast runs wherever mongoose casts the path: `castItem`, and the update
 * casting of `Model.bulkWrite` and `Model.updateMany`.
 */
export function castInteger(value: unknown): number | null | undefined {
  const n = castNumber(value);
  if (n != null && !Number.isInteger(n)) throw new Error(`${n} is not an integer`);
  return n;
}

/**
 * What a field's values are: its `type`; for a json field with no `type` or `regex`, any JSON value
 * as the page had it (a number stays a number, an object an object), which the store keeps Mixed.
 */
function storedType(rule: Pick<FieldRule, 'type' | 'json' | 'regex'>): NonNullable<FieldRule['type']> | 'mixed' {
  if (rule.type === undefined && rule.json !== undefined && rule.regex === undefined) return 'mixed';
  return rule.type ?? 'string';
}

/** Pure: the schema type of one field rule; `all: true` makes it an array of that type. */
export function fieldSchemaType(rule: Pick<FieldRule, 'type' | 'all' | 'json' | 'regex'>): SchemaDefinitionProperty {
  let one: SchemaDefinitionProperty;
  switch (storedType(rule)) {
    case 'string':
      one = { type: String };
      break;
    case 'number':
      one = { type: Number };
      break;
    case 'integer':
      one = { type: Number, cast: castInteger };
      break;
    case 'boolean':
      one = { type: Boolean };
      break;
    case 'mixed':
      one = { type: Schema.Types.Mixed };
      break;
  }
  return rule.all ? [one] : one;
}

/**
 * Pure: the mongoose schema of one item rule. Its paths: the fields every item carries, the rule's
 * fields typed by their rules, and the store's bookkeeping; a unique index on the key field, created
 * by `Model.createIndexes()` when the sink opens (never per write: autoIndex is off).
 *
 * `strict: 'throw'`: a field that is not in the rule refuses its item (see `castItem`) instead of
 * being dropped without a word; mongoose's own update casting refuses it too.
 */
export function itemSchema(rule: ItemRule): Schema {
  const key = rule.key ?? 'url';
  const fields: Record<string, SchemaDefinitionProperty> = {};
  for (const [name, field] of Object.entries(rule.fields)) {
    if (STORE_FIELDS.has(name)) {
      throw new NonRetryableError('ERR_ITEM_SCHEMA', `item type "${rule.type}": the field "${name}" has a name the MongoDB store keeps for itself (${[...STORE_FIELDS].join(', ')}); rename the field`);
    }
    fields[name] = fieldSchemaType(field);
  }
  let schema: Schema;
  try {
    schema = new Schema(
      { ...ITEM_FIELDS, ...fields, ...BOOKKEEPING },
      {
        collection: rule.type,
        strict: 'throw',
        versionKey: false,
        // No `id` virtual: a rule may have a field named `id`.
        id: false,
        autoIndex: false,
        // Documents are never hydrated (items are cast path by path and written lean), so field names
        // mongoose reserves for its Document methods (`errors`, `get`, `init`, …) are harmless here.
        suppressReservedKeysWarning: true,
      },
    );
  } catch (err) {
    throw new NonRetryableError('ERR_ITEM_SCHEMA', `item type "${rule.type}": no mongoose schema for its fields: ${(err as Error).message}`, {}, { cause: err });
  }
  schema.index({ [key]: 1 }, { unique: true, name: `${key}_unique` });
  return schema;
}

/** Pure: a name for the model of an item rule; two rules with the same fields and key share it. */
export function itemModelName(rule: ItemRule): string {
  const shape = [
    rule.key ?? 'url',
    Object.entries(rule.fields)
      .map(([name, f]) => [name, storedType(f), f.all === true])
      .sort(),
  ];
  return `${rule.type}#${createHash('sha1').update(JSON.stringify(shape)).digest('hex').slice(0, 12)}`;
}

export type CastResult = { doc: Item; reason?: undefined } | { doc?: undefined; reason: string };

function castFailure(field: string, err: unknown): string {
  // The innermost reason of a cast error (an array's element's), when it is one of ours (an integer
  // cast), says why; mongoose's own reasons (assertions, nested cast errors) add nothing to its message.
  let reason = (err as { reason?: unknown }).reason;
  while (reason instanceof mongoose.Error && (reason as { reason?: unknown }).reason instanceof Error) reason = (reason as { reason?: unknown }).reason;
  const why = reason instanceof Error && !(reason instanceof mongoose.Error) && reason.name !== 'AssertionError' ? `: ${reason.message}` : '';
  return `field "${field}": ${(err as Error).message}${why}`;
}

/**
 * Pure: an item cast against its schema by mongoose, path by path (each path's own `cast`, the cast
 * `Model.insertMany`, `Model.bulkWrite` and `Document` use), or the reason it does not fit: a value
 * that does not cast, or a field the schema does not have. Null stays null (a field the page did not
 * have), as the extractor gave it. Documents are not hydrated: cheaper, and a field may then have any
 * name the spider format allows, even one of mongoose's Document methods.
 */
export function castItem(schema: Schema, item: Item): CastResult {
  const doc: Item = {};
  const problems: string[] = [];
  for (const [field, value] of Object.entries(item)) {
    const path: SchemaType | undefined = STORE_FIELDS.has(field) || !Object.hasOwn(schema.paths, field) ? undefined : schema.paths[field];
    if (!path) {
      problems.push(`field "${field}" is not in the schema (strict)`);
      continue;
    }
    if (value === null || value === undefined) {
      doc[field] = null;
      continue;
    }
    try {
      const cast: unknown = path.cast(value);
      doc[field] = Array.isArray(cast) ? [...(cast as unknown[])] : cast;
    } catch (err) {
      problems.push(castFailure(field, err));
    }
  }
  if (problems.length > 0) return { reason: `the item does not fit the schema of type ${JSON.stringify(String(item.type))}: ${problems.join('; ')}` };
  return { doc };
}
