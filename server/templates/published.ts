// A published template as sends use it: parsed once per request, rendered once per distinct set of
// values (a batch of 100 emails with one template and the same values renders it once), and each
// rendered part held to the contract's rules for the part it becomes (Subject, HtmlBody, TextBody),
// since values and fallbacks can add what the template itself was checked without.
import type { ValidateFunction } from 'ajv/dist/2020.js';
import { loadSpec, resolveRef, schemaCompiler } from '../contract.ts';
import type { TemplateRecord } from '../store/templates.ts';
import { OutputTooLong, parseTemplate, render, RenderError, type ParsedTemplate, type Values } from './render.ts';
import type { PublishedTemplate } from './routes.ts';

type Part = 'subject' | 'html' | 'text';

interface Prepared {
  published: PublishedTemplate;
  parsed: Partial<Record<Part, ParsedTemplate>>;
  /** Rendered parts, or why they could not be, by part and values. */
  rendered: Map<string, string | RenderError>;
}

// Keyed by the record a request's memoized lookup returns, so it lives as long as the request.
const prepared = new WeakMap<TemplateRecord, Prepared>();

interface Rule {
  validate: ValidateFunction;
  maxLength: number;
  description: string;
}

let rules: Record<Part, Rule> | undefined;
/** The contract's schema for each part, compiled from openapi.yaml on first use. */
function partRules(): Record<Part, Rule> {
  if (!rules) {
    const spec = loadSpec();
    const compile = schemaCompiler(spec);
    const rule = (name: string): Rule => {
      const schema = resolveRef(spec, { $ref: `#/components/schemas/${name}` });
      return { validate: compile(`/components/schemas/${name}`), maxLength: schema.maxLength, description: schema.description.trim() };
    };
    rules = { subject: rule('Subject'), html: rule('HtmlBody'), text: rule('TextBody') };
  }
  return rules;
}

export function publishedTemplate(record: TemplateRecord): PublishedTemplate {
  return prepare(record).published;
}

/**
 * One part of a published template rendered with the values, checked against the part's schema;
 * null when the template has no such part. Throws a RenderError saying what is wrong.
 */
export function renderPart(record: TemplateRecord, part: Part, values: Values): string | null {
  const template = prepare(record);
  const source = template.published[part];
  if (source === null) return null;
  const key = `${part}\0${JSON.stringify([...values].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))}`;
  let result = template.rendered.get(key);
  if (result === undefined) {
    const rule = partRules()[part];
    const wrong = (what: string) => new RenderError(`With these \`template.variables\`, the template's \`${part}\` ${what}`);
    const tooLong = wrong(`is longer than ${rule.maxLength} characters.`);
    try {
      const parsed = (template.parsed[part] ??= parseTemplate(source));
      // maxLength counts code points, which take up to two UTF-16 units: stop at twice it while
      // rendering (memory stays bounded), then let the schema judge the exact length.
      result = render(parsed, values, template.published.variables, { escape: part === 'html', maxLength: 2 * rule.maxLength });
      if (!rule.validate(result)) {
        const keyword = rule.validate.errors?.[0]?.keyword;
        result = keyword === 'maxLength' ? tooLong : keyword === 'minLength' ? wrong('is empty.') : wrong(`is not ${lowerFirst(rule.description)}`);
      }
    } catch (error) {
      if (!(error instanceof RenderError)) throw error;
      result = error instanceof OutputTooLong ? tooLong : error;
    }
    template.rendered.set(key, result);
  }
  if (result instanceof RenderError) throw result;
  return result;
}

function prepare(record: TemplateRecord): Prepared {
  let found = prepared.get(record);
  if (!found) {
    found = { published: JSON.parse(record.published!), parsed: {}, rendered: new Map() };
    prepared.set(record, found);
  }
  return found;
}

const lowerFirst = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);
