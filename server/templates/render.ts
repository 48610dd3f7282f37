// Template rendering: `{{{NAME}}}` and `{{{NAME|fallback}}}` in subject, html and text. A value comes
// from the send's variables, else the inline fallback, else the declared fallback; a variable with
// none of them is an error naming it. Values are HTML-escaped where they land in html.
import type { Schemas } from '../api.ts';

type Declared = Schemas['TemplateVariable'];
type Given = NonNullable<Schemas['TemplateUse']['variables']>;

const PLACEHOLDER = /\{\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\|([^}]*))?\}\}\}/g;

export class MissingVariable extends Error {}

/** The variables as one map, whichever of the two forms the send used. */
export function variableMap(given: Given | undefined): Map<string, string | number> {
  if (!given) return new Map();
  return new Map(Array.isArray(given) ? given.map(({ key, value }) => [key, value]) : Object.entries(given));
}

/** Checks given values against the declared types; returns a message for the first mismatch. */
export function typeMismatch(declared: Declared[], values: Map<string, string | number>): string | undefined {
  for (const { key, type } of declared) {
    const value = values.get(key);
    if (value !== undefined && typeof value !== type) return `The template variable \`${key}\` must be a ${type}.`;
  }
  return undefined;
}

export function render(source: string, values: Map<string, string | number>, declared: Declared[], escape: boolean): string {
  return source.replace(PLACEHOLDER, (_, name: string, inline: string | undefined) => {
    const value = values.get(name) ?? inline ?? declared.find((d) => d.key === name)?.fallback_value ?? undefined;
    if (value === undefined || value === null) throw new MissingVariable(`Missing template variable \`${name}\`; give it in \`template.variables\` or declare a fallback.`);
    return escape ? escapeHtml(String(value)) : String(value);
  });
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
