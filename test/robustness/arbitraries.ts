// fast-check arbitraries read from the contract's own JSON Schemas. `valid` yields values the schema
// accepts (realistic ones mostly, boundary sizes now and then: that is where bugs live); `hostile`
// yields the same shapes with, here and there, one node attacked: a wrong type, a missing or extra
// field, a length or count one past the limit, NUL, CR/LF, RTL and astral characters, template syntax,
// address strings that hide several mailboxes, deep nesting. Only the subset of JSON Schema that
// openapi.yaml uses is handled; anything else throws, so a new keyword in the spec is noticed here.
import fc from 'fast-check';
import { resolveRef, type OpenApiDocument } from '../../server/contract.ts';

type Schema = Record<string, any> | boolean;
type Arb = fc.Arbitrary<unknown>;

const KNOWN = new Set([
  '$ref', 'type', 'enum', 'const', 'properties', 'required', 'additionalProperties', 'items', 'minItems', 'maxItems',
  'minLength', 'maxLength', 'pattern', 'format', 'oneOf', 'anyOf', 'allOf', 'maxProperties', 'minProperties', 'uniqueItems',
  'propertyNames', 'patternProperties', 'dependentSchemas', 'minimum', 'maximum', 'default', 'description', 'examples', 'example',
  'x-pattern-meaning', // words for the refusal, no constraint
  'contentEncoding', // an annotation: where it matters, a pattern states the form
]);

/** How big "small" values get; boundary values ignore it. */
const CAP = { string: 24, items: 3, keys: 4 };

/** A mailbox as the API means it (`addr` or `Name <addr>`): the schema says so only in prose. */
const displayName = fc.stringMatching(/^[A-Za-z][A-Za-z .'-]{0,20}[A-Za-z]$/);
export const address = fc.tuple(fc.stringMatching(/^[a-z0-9]([a-z0-9._+-]{0,14}[a-z0-9])?$/), fc.constantFrom('example.com', 'acme.dev', 'mail.example.org'))
  .filter(([local]) => !local.includes('..'))
  .map(([local, domain]) => `${local}@${domain}`);
export const mailbox = fc.oneof(address, fc.tuple(displayName, address).map(([name, addr]) => `${name} <${addr}>`));

/** Address strings that are, or pretend to be, more (or less) than one mailbox. */
export const ADDRESS_ATTACKS = [
  'c1@evil.test, c2@evil.test <real@example.com>',
  'undisclosed: a@evil.test, b@evil.test;',
  'g: a@evil.test;',
  'x" <a@acme.test>',
  '"x\\" <a@acme.test>',
  'a@evil.test;b@evil.test',
  'Real <real@example.com>, x@evil.test',
  'real@example.com (x@evil.test)',
  '<real@example.com> x@evil.test',
  'Name <real@example.com',
  'real@example.com\r\nBcc: x@evil.test',
  'real@example.com\nBcc: x@evil.test',
  '=?utf-8?B?eEBldmlsLnRlc3Q=?= <real@example.com>',
  '"x@evil.test" <real@example.com>',
  'a@localhost',
  'a..b@example.com',
  '.lead@example.com',
  'trail.@example.com',
  'a@-x.dev',
  'a@x..dev',
  'a@b',
  '@example.com',
  'ünïcödé@exämple.com',
  'a\u0000@example.com',
];

const LONG = [1_000, 70_000];

/** Strings that break parsers, databases, MIME and templates. */
export const stringAttacks: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '', ' ', '\u0000', 'a\u0000b', '\r\n', '\r', '\n', 'x\r\nBcc: h@evil.test', 'x\r\n\r\n<injected body>', '\t\u000b\u000c',
    '\u0007\u001b[31m\u007f', '\u202Eevil.exe', 'שלום עולם', '\u200f\u200e\u2066x\u2069', '😀👩‍👩‍👧', '𝕏𝔸', '\uD800', '\uDC00x', '\uFEFF',
    'Ａ', 'e\u0301', '{{{', '}}}', '{{{A|', '{{{A|b}}}', '{{{ A }}}', '{{{__proto__}}}', '{{{constructor|x}}}',
    "'; drop table contacts; --", '%00', '%0d%0a', '../../etc/passwd', '__proto__', 'constructor', 'null', '42', 'true', '[]',
    '\\', '"', '<script>alert(1)</script>', '=?utf-8?Q?x=0D=0ABcc:_h@evil.test?=',
  ),
  fc.constantFrom(...ADDRESS_ATTACKS),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: fc.constantFrom('\u0000', '\r', '\n', '\u202E', '\uFEFF', '😀', '"', ',', ';', '<', '>', '@', '\\', '{', '}', '|', 'a'), maxLength: 30 }),
  fc.constantFrom(...LONG).map((n) => 'x'.repeat(n)),
  fc.integer({ min: 1, max: 2_000 }).map((n) => '{{{A|'.repeat(n)),
  fc.integer({ min: 100, max: 20_000 }).map((n) => '<b>'.repeat(n) + 'x'),
);

const uuidAttacks = fc.constantFrom(
  '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'not-a-uuid', '123', '',
  '{e169aa45-1ecf-4183-9955-b1499d5701d3}', 'e169aa451ecf41839955b1499d5701d3', 'e169aa45-1ecf-4183-9955-b1499d5701d3x',
  'E169AA45-1ECF-4183-9955-B1499D5701D3', 'e169aa45-1ecf-4183-9955-b1499d5701d\u0000', "e169aa45' or '1'='1",
);

const wrongTypes: Arb = fc.constantFrom(0, -1, 1.5, 1e308, -0, '1', 'true', true, false, null, [], {}, [null], { $ref: '#' }, [[[]]]);

/** `[[[…]]]` or `{"a":{"a":…}}`, deep enough to hurt recursive code but not JSON.stringify. */
export const deepNesting: Arb = fc.tuple(fc.integer({ min: 64, max: 3_000 }), fc.boolean()).map(([depth, arrays]) => {
  let value: unknown = 'x';
  for (let i = 0; i < depth; i++) value = arrays ? [value] : { a: value };
  return value;
});

export interface SchemaArbitraries {
  valid(schema: Schema): Arb;
  hostile(schema: Schema): Arb;
  /** An attack on this node itself: never a valid value of the schema, or at least a suspicious one. */
  attack(schema: Schema): Arb;
}

/**
 * `hints` adjust, per `$ref`, what the generic arbitrary makes, for what the schema leaves to prose: a
 * Mailbox is any string of 3 to 320 characters to the schema but an address to the API, and an
 * OutgoingEmail needs `from`, `subject` and a body unless a template gives them. Without hints almost
 * every send would be refused, and nothing would get far enough to be tested.
 */
export type Hints = Record<string, (generic: Arb) => Arb>;

export const DEFAULT_HINTS: Hints = {
  '#/components/schemas/Mailbox': (generic) => fc.oneof({ weight: 4, arbitrary: mailbox }, { weight: 1, arbitrary: generic }),
  '#/components/schemas/OutgoingEmail': (generic) =>
    fc.oneof(
      { weight: 1, arbitrary: generic },
      {
        weight: 3,
        arbitrary: fc.tuple(generic, mailbox, fc.string({ minLength: 1, maxLength: 40 })).map(([email, from, subject]) => {
          if (typeof email !== 'object' || email === null || Array.isArray(email)) return email;
          const { template: _, ...rest } = email as Record<string, unknown>;
          return { from, subject, ...rest, ...(rest.html === undefined && rest.text === undefined && { text: subject }) };
        }),
      },
    ),
};

export function schemaArbitraries(spec: OpenApiDocument, hints: Hints = DEFAULT_HINTS): SchemaArbitraries {
  const memo = { valid: new Map<Schema, Arb>(), hostile: new Map<Schema, Arb>() };

  function build(schema: Schema, mode: 'valid' | 'hostile'): Arb {
    if (schema === true) return fc.jsonValue();
    if (schema === false) throw new Error('no value matches a false schema');
    const cached = memo[mode].get(schema);
    if (cached) return cached;
    // Deferred, as schemas may refer to each other, and built once: building one (fast-check parsing a
    // pattern into its arbitrary) can cost far more than drawing from it.
    let built: Arb | undefined;
    const arb = fc.constant(null).chain(() => (built ??= node(schema, mode)));
    memo[mode].set(schema, arb);
    return arb;
  }

  function node(schema: Record<string, any>, mode: 'valid' | 'hostile'): Arb {
    for (const keyword of Object.keys(schema)) if (!KNOWN.has(keyword)) throw new Error(`arbitraries: unsupported keyword ${keyword}`);
    if (schema.$ref) {
      const target = build(resolveRef(spec, schema), mode);
      return hints[schema.$ref]?.(target) ?? target;
    }
    const structured = structure(schema, mode);
    if (mode === 'valid') return structured;
    return fc.oneof({ weight: 24, arbitrary: structured }, { weight: 1, arbitrary: attack(schema) });
  }

  function structure(schema: Record<string, any>, mode: 'valid' | 'hostile'): Arb {
    if ('const' in schema) return fc.constant(schema.const);
    if (schema.allOf && !schema.type) return narrowed(schema, mode);
    if (schema.enum) return fc.constantFrom(...schema.enum);
    if ((schema.oneOf || schema.anyOf) && schema.type !== 'object') return fc.oneof(...(schema.oneOf ?? schema.anyOf).map((s: Schema) => build(s, mode)));
    if (Array.isArray(schema.type)) return fc.oneof(...schema.type.map((type: string) => structure({ ...schema, type }, mode)));
    // propertyNames schemas state only string keywords.
    const type = schema.type ?? (schema.pattern || schema.format || schema.maxLength !== undefined ? 'string' : undefined);
    switch (type) {
      case 'null':
        return fc.constant(null);
      case 'boolean':
        return fc.boolean();
      case 'integer':
        return fc.integer({ min: schema.minimum ?? -1e9, max: schema.maximum ?? 1e9 });
      case 'number':
        return fc.double({ min: schema.minimum, max: schema.maximum, noNaN: true, noDefaultInfinity: true });
      case 'string':
        return string(schema);
      case 'array':
        return array(schema, mode);
      case 'object':
        return object(schema, mode);
    }
    throw new Error(`arbitraries: cannot generate ${JSON.stringify(schema).slice(0, 80)}`);
  }

  /**
   * `allOf: [base, {properties: {name: false}}...]` (BatchEmail): the base's values without the
   * properties the other members refuse. No other use of allOf without a type is generated.
   */
  function narrowed(schema: Record<string, any>, mode: 'valid' | 'hostile'): Arb {
    const [base, ...others] = schema.allOf as Record<string, any>[];
    const onlyRefusals = (member: Record<string, any>) => Object.keys(member).every((keyword) => keyword === 'properties') && Object.values(member.properties).every((value) => value === false);
    if (!base || !others.every(onlyRefusals)) throw new Error(`arbitraries: cannot generate ${JSON.stringify(schema).slice(0, 80)}`);
    const refused = others.flatMap((member) => Object.keys(member.properties));
    return build(base, mode).map((value) => {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
      return Object.fromEntries(Object.entries(value).filter(([name]) => !refused.includes(name)));
    });
  }

  function string(schema: Record<string, any>): fc.Arbitrary<string> {
    const min = schema.minLength ?? 0;
    const max = schema.maxLength ?? Infinity;
    const fits = (s: string) => s.length >= min && s.length <= max;
    switch (schema.format) {
      case 'uuid':
        return fc.uuid();
      case 'email':
        return address.filter((text) => fits(text) && (!schema.pattern || new RegExp(schema.pattern).test(text)));
      case 'date-time':
        return fc.date({ min: new Date('2000-01-01'), max: new Date('2099-12-31'), noInvalidDate: true }).map((d) => d.toISOString());
      case 'uri':
        return fc.webUrl({ validSchemes: ['https', 'http'], withQueryParameters: true, withFragments: true }).filter((u) => fits(u) && (!schema.pattern || new RegExp(schema.pattern).test(u)));
    }
    if (schema.pattern) {
      // fast-check draws from no lookahead: a leading `(?!…)` is left out of the drawing and kept by the filter.
      const whole = new RegExp(schema.pattern);
      const drawn = new RegExp(schema.pattern.replace(/^\^\(\?![^)]*\)/, '^'));
      return fc.stringMatching(drawn).filter((text) => whole.test(text) && fits(text));
    }
    const small = fc.oneof(
      { weight: 6, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: min, maxLength: Math.max(min, Math.min(max, CAP.string)) }) },
      { weight: 2, arbitrary: fc.string({ unit: 'grapheme', minLength: min, maxLength: Math.max(min, Math.min(max, CAP.string)) }) },
    ).filter(fits);
    // The longest string allowed, in ASCII and in astral characters (two UTF-16 units each: where
    // code that counts bytes or code points disagrees with the schema's UTF-16 count).
    const longest = Number.isFinite(max) ? [fc.constant('x'.repeat(max)), fc.constant('😀'.repeat(Math.floor(max / 2)))] : [];
    return fc.oneof({ weight: 10, arbitrary: small }, ...longest.map((arbitrary) => ({ weight: 1, arbitrary })));
  }

  function array(schema: Record<string, any>, mode: 'valid' | 'hostile'): Arb {
    const min = schema.minItems ?? 0;
    const max = schema.maxItems ?? Infinity;
    if (schema.uniqueItems) {
      // Distinct items: a shuffled pick from an enum (random draws would rarely fill one to its size).
      const choices = resolveRef(spec, schema.items)?.enum as unknown[] | undefined;
      if (choices) return fc.shuffledSubarray(choices, { minLength: min, maxLength: Math.min(max, choices.length) });
      return fc.uniqueArray(build(schema.items ?? true, mode), { minLength: min, maxLength: Math.max(min, Math.min(max, CAP.items)), selector: (v) => JSON.stringify(v) });
    }
    const items = build(schema.items ?? true, mode);
    const small = fc.array(items, { minLength: min, maxLength: Math.max(min, Math.min(max, CAP.items)) });
    if (!Number.isFinite(max)) return small;
    return fc.oneof({ weight: 12, arbitrary: small }, { weight: 1, arbitrary: fc.array(items, { minLength: max, maxLength: max }) });
  }

  function object(schema: Record<string, any>, mode: 'valid' | 'hostile'): Arb {
    const properties: Record<string, Schema> = schema.properties ?? {};
    const model = Object.fromEntries(Object.entries(properties).filter(([, s]) => s !== false).map(([key, s]) => [key, build(s, mode)]));
    // allOf: [{anyOf: [{required: [a]}, {required: [b]}]}] says "a or b": pick one alternative per member.
    const alternatives = (schema.allOf ?? []).map((member: any) => fc.constantFrom(...(member.anyOf ?? [member]).map((s: any) => s.required ?? [])));
    // oneOf: [{required: [a]}, {required: [b]}] says "a or b, not both" (an attachment's content or path).
    const exclusive: string[] = (schema.oneOf ?? []).map((member: any) => member.required[0]);
    if (exclusive.length > 0) alternatives.push(fc.constantFrom(...exclusive.map((name) => [name])));
    const extras = schema.patternProperties
      ? patternDictionary(schema, mode)
      : schema.additionalProperties && schema.additionalProperties !== true
        ? dictionary(schema, mode)
        : fc.constant({});
    return fc
      .tuple(fc.tuple(...alternatives), extras)
      .chain(([chosen, extra]) => {
        const requiredKeys = [...new Set([...(schema.required ?? []), ...(chosen as string[][]).flat()])];
        return fc.record(model, { requiredKeys }).map((value) => ({ ...(extra as object), ...value }));
      })
      .map((value: Record<string, unknown>) => {
        // dependentSchemas: with `template`, `html` and `text` are `false` (must be absent).
        const chosen = exclusive.find((name) => name in value);
        for (const name of exclusive) if (name !== chosen) delete value[name];
        for (const [key, dependent] of Object.entries<any>(schema.dependentSchemas ?? {})) {
          if (key in value) for (const [name, s] of Object.entries(dependent.properties ?? {})) if (s === false) delete value[name];
        }
        return value;
      })
      .filter((value) => Object.keys(value).length >= (schema.minProperties ?? 0));
  }

  function dictionary(schema: Record<string, any>, mode: 'valid' | 'hostile'): fc.Arbitrary<Record<string, unknown>> {
    const keys = schema.propertyNames ? (build(schema.propertyNames, 'valid') as fc.Arbitrary<string>) : fc.string({ minLength: 1, maxLength: 20 });
    const values = build(schema.additionalProperties, mode);
    const max = schema.maxProperties ?? Infinity;
    const small = fc.dictionary(keys, values, { maxKeys: Math.min(max, CAP.keys), noNullPrototype: true });
    if (!Number.isFinite(max)) return small;
    const full = fc.dictionary(keys, values, { minKeys: max, maxKeys: max, noNullPrototype: true });
    return fc.oneof({ weight: 8, arbitrary: small }, { weight: 1, arbitrary: full });
  }

  /** patternProperties: keys drawn from each pattern, each with its own value schema. */
  function patternDictionary(schema: Record<string, any>, mode: 'valid' | 'hostile'): fc.Arbitrary<Record<string, unknown>> {
    const max = Math.min(schema.maxProperties ?? Infinity, CAP.keys);
    const entries = Object.entries<Schema>(schema.patternProperties).map(([pattern, value]) =>
      fc.dictionary(fc.stringMatching(new RegExp(pattern)), build(value, mode), { maxKeys: max, noNullPrototype: true }),
    );
    return fc.tuple(...entries).map((parts) => Object.fromEntries(parts.flatMap((part) => Object.entries(part)).slice(0, max)));
  }

  /** One node attacked: what it is, its bounds, or its neighbours. */
  function attack(schema: Record<string, any>): Arb {
    const attacks: Arb[] = [wrongTypes, deepNesting];
    for (const branch of schema.oneOf ?? schema.anyOf ?? []) attacks.push(attack(resolveRef(spec, branch)));
    const type = [schema.type].flat();
    if (type.includes('string') || schema.format) attacks.push(stringAttacks, stringAttacks, ...lengthAttacks(schema));
    if (schema.format === 'uuid') attacks.push(uuidAttacks, uuidAttacks);
    if (schema.format === 'email') attacks.push(fc.constantFrom(...ADDRESS_ATTACKS), fc.constantFrom(...ADDRESS_ATTACKS));
    if (type.includes('integer') || type.includes('number')) attacks.push(numberAttacks(schema));
    if (type.includes('array')) attacks.push(countAttacks(schema));
    if (type.includes('object')) attacks.push(objectAttacks(schema));
    return fc.oneof(...attacks);
  }

  function lengthAttacks(schema: Record<string, any>): Arb[] {
    const out: Arb[] = [];
    if (schema.maxLength !== undefined) out.push(fc.constant('y'.repeat(schema.maxLength + 1)), fc.constant('😀'.repeat(schema.maxLength)));
    if (schema.minLength) out.push(fc.constant('z'.repeat(schema.minLength - 1)));
    return out;
  }

  function numberAttacks(schema: Record<string, any>): Arb {
    const values: unknown[] = [1.5, 1e308, -1e308, '7', '1e3', ''];
    if (schema.minimum !== undefined) values.push(schema.minimum - 1, String(schema.minimum));
    if (schema.maximum !== undefined) values.push(schema.maximum + 1, String(schema.maximum));
    return fc.constantFrom(...values);
  }

  function countAttacks(schema: Record<string, any>): Arb {
    const items = build(schema.items ?? true, 'valid');
    const lengths = [0, ...(schema.maxItems !== undefined ? [schema.maxItems + 1] : [])];
    return fc.constantFrom(...lengths).chain((n) => fc.array(items, { minLength: n, maxLength: n }));
  }

  function objectAttacks(schema: Record<string, any>): Arb {
    const valid = build(schema, 'valid') as fc.Arbitrary<Record<string, unknown>>;
    const required: string[] = schema.required ?? [];
    const without = required.length
      ? fc.tuple(valid, fc.constantFrom(...required)).map(([value, key]) => {
          const copy = { ...value };
          delete copy[key];
          return copy;
        })
      : valid;
    const extraKey = fc.oneof(fc.constantFrom('__proto__', 'constructor', 'unknown_field', 'attachments', 'scheduled_at', ''), fc.string({ maxLength: 12 }));
    const extra = fc.tuple(valid, extraKey, fc.jsonValue({ maxDepth: 2 })).map(([value, key, v]) => Object.defineProperty({ ...value }, key, { value: v, enumerable: true }));
    // The same key twice in different case: headers are case-insensitive, JSON keys are not.
    const twins = fc.tuple(valid, fc.constantFrom('Bcc', 'To', 'Email', 'email', 'X-Tag')).map(([value, key]) => {
      const first = Object.keys(value)[0] ?? key;
      return { ...value, [swapCase(first)]: value[first] ?? 'h@evil.test', [first]: value[first] ?? 'h@evil.test' };
    });
    return fc.oneof(without, extra, twins);
  }

  return {
    valid: (schema) => build(schema, 'valid'),
    hostile: (schema) => build(schema, 'hostile'),
    attack: (schema) => attack(resolveRef(spec, schema)),
  };
}

export const swapCase = (s: string) => [...s].map((c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())).join('');
