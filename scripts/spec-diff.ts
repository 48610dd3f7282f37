// What the working contract changes against another version of it, as Markdown for a review,
// breaking changes first. Redocly's `diff` (rules: diff-recommended in scripts/redocly-diff.yaml) finds and rates
// the changes; this script picks the base from git, renders them, and decides the exit code.
// Both sides are whole documents: the working openapi.yaml bundled afresh (as `npm run generate` does),
// and the base's generated/openapi.yaml, or its openapi.yaml where it has no bundle (a single file then).
//
//   npm run spec:diff [-- <git-ref>]   against <git-ref>, default HEAD: what uncommitted work changes
//   npm run spec:gate [-- <git-ref>]   for CI, default HEAD~1: what the last commit changed; with no
//                                      base in the clone (shallow, first commit) it passes with a note
//
// Exit 1 when a change breaks clients (a major change) and info.version's major was not bumped;
// exit 2 when the comparison itself cannot run.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';

type Impact = 'major' | 'minor' | 'patch';
interface Place {
  pointer: string;
  line?: number;
}
/** One entry of `redocly diff --format json`. */
interface Change {
  path: string;
  kind: 'added' | 'removed' | 'modified';
  impact: Impact;
  property?: string;
  verdicts: { impact: Impact; message: string; location?: Place }[];
  base?: Place;
  revision?: Place;
}

const tool = new URL('..', import.meta.url).pathname;
const args = process.argv.slice(2);
const gate = args.includes('--gate');
const ref = args.find((arg) => !arg.startsWith('--')) ?? (gate ? 'HEAD~1' : 'HEAD');

const git = (...gitArgs: string[]) => execFileSync('git', gitArgs, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 }).trim();
const attempt = <T>(run: () => T): T | undefined => {
  try {
    return run();
  } catch {
    return undefined;
  }
};

/** Ends the run: passes with a note in gate mode, fails with exit 2 otherwise. */
function cannotCompare(why: string): never {
  if (gate) {
    console.log(`## Contract changes\n\n> Nothing to compare: ${why}. The gate passes.`);
    process.exit(0);
  }
  console.error(`spec:diff: ${why}`);
  process.exit(2);
}

const top = attempt(() => git('rev-parse', '--show-toplevel')) ?? cannotCompare('this is not a git work tree');
const spec = 'openapi.yaml';
// Line numbers in the report are the bundle's, as `npm run generate` writes it here.
const bundle = 'generated/openapi.yaml';
if (attempt(() => git('rev-parse', '--verify', '--quiet', `${ref}^{commit}`)) === undefined) {
  cannotCompare(`\`${ref}\` is not a commit in this clone (a shallow clone, or the first commit)`);
}
const baseText = attempt(() => git('show', `${ref}:${bundle}`)) ?? attempt(() => git('show', `${ref}:${spec}`)) ?? cannotCompare(`\`${ref}\` has no ${spec}`);

const redocly = (...redoclyArgs: string[]) =>
  execFileSync(join(tool, 'node_modules/.bin/redocly'), redoclyArgs, { env: { ...process.env, REDOCLY_TELEMETRY: 'off' }, stdio: ['ignore', 'ignore', 'pipe'] });
const work = mkdtempSync(join(tmpdir(), 'spec-diff-'));
let changes: Change[];
let revisionText: string;
try {
  const [basePath, revisionPath, report] = ['base.yaml', 'revision.yaml', 'diff.json'].map((name) => join(work, name));
  writeFileSync(basePath, baseText);
  redocly('bundle', join(top, spec), '--config', join(tool, 'redocly.yaml'), '--component-renaming-conflicts-severity=error', '-o', revisionPath);
  revisionText = readFileSync(revisionPath, 'utf8');
  redocly('diff', basePath, revisionPath, '--config', join(tool, 'scripts/redocly-diff.yaml'), '--lint-config', 'off', '--format', 'json', '--fail-on', 'none', '-o', report);
  changes = (JSON.parse(readFileSync(report, 'utf8')) as { changes: Change[] }).changes;
} catch (error) {
  console.error(`spec:diff: redocly failed: ${(error as { stderr?: Buffer }).stderr?.toString().trim() || String(error)}`);
  process.exit(2);
} finally {
  rmSync(work, { recursive: true, force: true });
}

const version = (text: string) => String((yaml.load(text) as { info?: { version?: unknown } }).info?.version ?? '');
const major = (v: string) => (/^\d+/.test(v) ? Number.parseInt(v, 10) : Number.NaN);
const [baseVersion, revisionVersion] = [version(baseText), version(revisionText)];
const majorBumped = major(revisionVersion) > major(baseVersion);

const breaking = changes.filter((change) => change.impact === 'major');
const other = changes.filter((change) => change.impact !== 'major').sort((a, b) => (a.impact < b.impact ? -1 : a.impact > b.impact ? 1 : 0));

/** "GET /contacts/{contact_id}" from a JSON pointer into the document's paths. */
function operation(pointer: string): string {
  const [, section, path, method] = pointer.split('/').map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'));
  if (section !== 'paths' || !path) return '—';
  return /^(get|put|post|delete|options|head|patch|trace)$/.test(method ?? '') ? `${method!.toUpperCase()} ${path}` : path;
}

function describe(change: Change): string {
  if (change.verdicts.length) return change.verdicts.map((verdict) => verdict.message).join(' ');
  const place = (change.revision ?? change.base)?.pointer ?? change.path;
  const name = change.property ?? place.split('/').at(-1)!.replaceAll('~1', '/').replaceAll('~0', '~');
  return `\`${name}\` ${change.kind}.`;
}

function where(change: Change): string {
  const place = change.verdicts[0]?.location ?? (change.kind === 'removed' ? change.base : (change.revision ?? change.base));
  if (!place) return `\`${change.path}\``;
  const side = change.kind === 'removed' ? ` (${ref})` : place.line ? ` (${bundle}:${place.line})` : '';
  return `\`${place.pointer}\`${side}`;
}

const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');
const table = (rows: Change[], withImpact: boolean) =>
  [
    withImpact ? '| Impact | Operation (first affected) | Change | Where |' : '| Operation (first affected) | Change | Where |',
    withImpact ? '| --- | --- | --- | --- |' : '| --- | --- | --- |',
    ...rows.map((c) => `| ${withImpact ? `${c.impact} | ` : ''}${cell(operation(c.path))} | ${cell(describe(c))} | ${cell(where(c))} |`),
  ].join('\n');

const lines = [`## Contract changes: ${spec} against \`${ref}\``, ''];
lines.push(`Breaking: **${breaking.length}** · other: ${other.length} · info.version ${baseVersion} → ${revisionVersion}`, '');
if (breaking.length) lines.push('### Breaking changes', '', table(breaking, false), '');
if (other.length) lines.push('### Other changes', '', table(other, true), '');
if (!changes.length) lines.push('No changes.', '');
const refused = breaking.length > 0 && !majorBumped;
if (refused) {
  lines.push(`**Refused:** these changes break clients. Keep them compatible, or bump info.version's major (now ${revisionVersion}, was ${baseVersion}).`);
} else if (breaking.length) {
  lines.push(`Accepted: the breaking changes come with a major version bump (${baseVersion} → ${revisionVersion}).`);
}
console.log(lines.join('\n').trimEnd());
process.exit(refused ? 1 : 0);
