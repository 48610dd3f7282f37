// Template rendering: `{{{NAME}}}` and `{{{NAME|fallback}}}` in subject, html and text. A value comes
// from the send's variables, else the inline fallback, else the declared fallback; a variable with
// none of them is an error naming it. Values are HTML-escaped where they land in html.
//
// Templates are parsed by a hand-written scanner, once, into text and placeholders. A regular
// expression here backtracked: `{{{A|` repeated 12,000 times took close to a second per email, and
// grew with the square of the template. The scanner reads each character a bounded number of times
// (it counts them, so that tests can hold it to that), and rendering only joins the parts.
import type { Schemas } from '../api.ts';

type Declared = Schemas['TemplateVariable'];
type Given = NonNullable<Schemas['TemplateUse']['variables']>;
export type Values = Map<string, string | number>;

export interface Placeholder {
  name: string;
  /** The inline fallback, after `|`; undefined when there is none. */
  fallback: string | undefined;
}

/** A template as text runs and placeholders, in order. */
export interface ParsedTemplate {
  parts: (string | Placeholder)[];
  /** How many character reads the scan took: at most a small multiple of the source's length. */
  reads: number;
}

/** Why a template cannot be rendered with the values given; the message says it for the caller. */
export class RenderError extends Error {}
/** The output grew past the length allowed. */
export class OutputTooLong extends RenderError {}

/** The variables as one map, whichever of the two forms the send used. */
export function variableMap(given: Given | undefined): Values {
  if (!given) return new Map();
  return new Map(Array.isArray(given) ? given.map(({ key, value }) => [key, value]) : Object.entries(given));
}

/** Checks given values against the declared types; returns a message for the first mismatch. */
export function typeMismatch(declared: Declared[], values: Values): string | undefined {
  for (const { key, type } of declared) {
    const value = values.get(key);
    if (value !== undefined && typeof value !== type) return `The template variable \`${key}\` must be a ${type}.`;
  }
  return undefined;
}

const OPEN = 0x7b; // {
const CLOSE = 0x7d; // }
const BAR = 0x7c; // |
const isSpace = (c: number) => c === 0x20 || (c >= 0x09 && c <= 0x0d) || c === 0xa0 || c === 0xfeff || (c >= 0x2000 && c <= 0x200a) || c === 0x1680 || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000;
const isNameStart = (c: number) => (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x5f;
const isName = (c: number) => isNameStart(c) || (c >= 0x30 && c <= 0x39);
const DOT = 0x2e;

export interface ParseOptions {
  /** Names may hold dots after their first character (`contact.first_name`), as a broadcast's do. */
  dotted?: boolean;
}

/**
 * Splits a template into text and placeholders. A placeholder is `{{{`, optional spaces, a name,
 * optional spaces, optionally `|` and a fallback without `}`, then `}}}`; anything else is text.
 */
export function parseTemplate(source: string, { dotted = false }: ParseOptions = {}): ParsedTemplate {
  const end = source.length;
  const inName = dotted ? (c: number) => isName(c) || c === DOT : isName;
  let reads = 0;
  const at = (i: number) => (reads++, source.charCodeAt(i));
  // The first `}` at or after a position. Fallbacks of failed placeholders overlap (`{{{A|{{{A|…`),
  // so the answer is kept for every position from where it was searched to where it was found:
  // positions only move forward, and no character is searched twice.
  let searchedFrom = 1;
  let close = 0;
  const nextClose = (from: number) => {
    if (from < searchedFrom || from > close) {
      for (close = from; close < end && at(close) !== CLOSE; ) close++;
      searchedFrom = from;
    }
    return close;
  };

  /** The placeholder whose `{{{` ends just before `i`: [placeholder, position after it], or undefined. */
  const placeholderAt = (i: number): [Placeholder, number] | undefined => {
    while (i < end && isSpace(at(i))) i++;
    if (i >= end || !isNameStart(at(i))) return undefined;
    const nameStart = i++;
    while (i < end && inName(at(i))) i++;
    const name = source.slice(nameStart, i);
    while (i < end && isSpace(at(i))) i++;
    let fallback: string | undefined;
    if (i < end && at(i) === BAR) {
      const stop = nextClose(i + 1);
      fallback = source.slice(i + 1, stop);
      i = stop;
    }
    if (i + 2 < end && at(i) === CLOSE && at(i + 1) === CLOSE && at(i + 2) === CLOSE) return [{ name, fallback }, i + 3];
    return undefined;
  };

  const parts: ParsedTemplate['parts'] = [];
  let text = 0;
  for (let i = 0; i + 2 < end; ) {
    if (at(i) !== OPEN || at(i + 1) !== OPEN || at(i + 2) !== OPEN) {
      i++;
      continue;
    }
    const found = placeholderAt(i + 3);
    if (!found) {
      i++;
      continue;
    }
    if (i > text) parts.push(source.slice(text, i));
    parts.push(found[0]);
    i = text = found[1];
  }
  if (text < end) parts.push(source.slice(text));
  return { parts, reads };
}

export interface RenderOptions {
  /** HTML-escape the values (and inline fallbacks) placed into the output. */
  escape: boolean;
  /** The longest output allowed, in UTF-16 units; rendering stops with OutputTooLong past it. */
  maxLength: number;
}

export function render(template: ParsedTemplate, values: Values, declared: Declared[], { escape, maxLength }: RenderOptions): string {
  const out: string[] = [];
  let length = 0;
  for (const piece of template.parts) {
    let chunk: string;
    if (typeof piece === 'string') chunk = piece;
    else {
      const { name, fallback } = piece;
      const value = values.get(name) ?? fallback ?? declared.find((d) => d.key === name)?.fallback_value ?? undefined;
      if (value === undefined || value === null) throw new RenderError(`Missing template variable \`${name}\`; give it in \`template.variables\` or declare a fallback.`);
      chunk = escape ? escapeHtml(String(value)) : String(value);
    }
    // Checked as it grows: a short template repeating a long value could otherwise fill the memory.
    length += chunk.length;
    if (length > maxLength) throw new OutputTooLong(`The output is longer than ${maxLength} UTF-16 units.`);
    out.push(chunk);
  }
  return out.join('');
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
