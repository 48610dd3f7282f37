// npm run spec:diff and spec:gate: in a scratch git repository holding this contract, each change to it
// is reported as Markdown, breaking changes first, and only a breaking change without a major version
// bump fails.
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = new URL('..', import.meta.url).pathname;
// The bundled contract, one file, is the scratch repository's openapi.yaml.
const contract = readFileSync(join(root, 'generated/openapi.yaml'), 'utf8');
// The outer repository's git variables must not leak into the scratch one.
const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('GIT_')));

type Document = { info: { version: string }; components: { schemas: Record<string, { required?: string[]; properties?: Record<string, unknown> }> } };
/** The contract with an edit applied; the base is the committed contract as it is. */
function edited(edit: (document: Document) => void): string {
  const document = yaml.load(contract) as Document;
  edit(document);
  return yaml.dump(document, { lineWidth: -1, noRefs: true });
}
const dropRequiredEmail = (d: Document) => void (d.components.schemas['Contact']!.required = d.components.schemas['Contact']!.required!.filter((f) => f !== 'email'));
const addNickname = (d: Document) => void (d.components.schemas['Contact']!.properties!['nickname'] = { type: 'string', maxLength: 64 });
const bumpMajor = (d: Document) => void (d.info.version = `${Number.parseInt(d.info.version, 10) + 1}.0.0`);

let repo = '';
const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.com', ...args], { cwd, env, stdio: 'pipe' });

/** Runs the script as `npm run spec:diff` / `spec:gate` do, in `cwd`. */
function specDiff(cwd: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(join(root, 'node_modules/.bin/tsx'), [join(root, 'scripts/spec-diff.ts'), ...args], { cwd, env }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    );
  });
}

beforeAll(() => {
  repo = mkdtempSync(join(tmpdir(), 'mailroom-spec-diff-'));
  git(repo, 'init', '-q');
  writeFileSync(join(repo, 'openapi.yaml'), contract);
  git(repo, 'add', 'openapi.yaml');
  git(repo, 'commit', '-q', '-m', 'base');
});
afterAll(() => rmSync(repo, { recursive: true, force: true }));

describe('spec:diff against HEAD (uncommitted work)', () => {
  it('reports a required response field made optional as breaking, and exits 1', async () => {
    writeFileSync(join(repo, 'openapi.yaml'), edited(dropRequiredEmail));
    const { code, stdout } = await specDiff(repo);
    expect(stdout).toContain('## Contract changes: openapi.yaml against `HEAD`');
    expect(stdout).toMatch(/### Breaking changes\n\n.*\n.*\n\| GET \/contacts \| Properties of `Contact` are no longer required: `email`\. \| `#\/components\/schemas\/Contact\/required`/);
    expect(stdout).toContain('**Refused:**');
    expect(code).toBe(1);
  });

  it('reports an added optional field as a non-breaking change, and exits 0', async () => {
    writeFileSync(join(repo, 'openapi.yaml'), edited(addNickname));
    const { code, stdout } = await specDiff(repo);
    expect(stdout).toContain('Breaking: **0** · other: 1');
    expect(stdout).not.toContain('### Breaking changes');
    expect(stdout).toMatch(/### Other changes\n\n.*\n.*\n\| minor \| GET \/contacts \| `nickname` added\. \| `#\/components\/schemas\/Contact\/properties\/nickname` \(generated\/openapi\.yaml:\d+\) \|/);
    expect(code).toBe(0);
  });

  it('lists breaking changes before the others', async () => {
    writeFileSync(join(repo, 'openapi.yaml'), edited((d) => (addNickname(d), dropRequiredEmail(d))));
    const { code, stdout } = await specDiff(repo);
    expect(stdout.indexOf('### Breaking changes')).toBeGreaterThan(0);
    expect(stdout.indexOf('### Breaking changes')).toBeLessThan(stdout.indexOf('### Other changes'));
    expect(code).toBe(1);
  });

  it("passes a breaking change that comes with a bump of info.version's major", async () => {
    writeFileSync(join(repo, 'openapi.yaml'), edited((d) => (dropRequiredEmail(d), bumpMajor(d))));
    const { code, stdout } = await specDiff(repo);
    expect(stdout).toContain('### Breaking changes');
    const { version } = (yaml.load(contract) as Document).info;
    expect(stdout).toContain(`Accepted: the breaking changes come with a major version bump (${version} → ${Number.parseInt(version, 10) + 1}.0.0)`);
    expect(code).toBe(0);
  });

  it('says so, and exits 2, for a ref that is not there', async () => {
    const { code, stderr } = await specDiff(repo, 'no-such-ref');
    expect(stderr).toContain('`no-such-ref` is not a commit');
    expect(code).toBe(2);
  });
});

describe('spec:gate against the previous commit (CI)', () => {
  it('passes with a note when there is no previous commit', async () => {
    writeFileSync(join(repo, 'openapi.yaml'), contract);
    const { code, stdout } = await specDiff(repo, '--gate');
    expect(stdout).toContain('Nothing to compare: `HEAD~1` is not a commit in this clone');
    expect(code).toBe(0);
  });

  it('fails on a committed breaking change without a major bump, and passes with one', async () => {
    writeFileSync(join(repo, 'openapi.yaml'), edited(dropRequiredEmail));
    git(repo, 'commit', '-q', '-am', 'breaking');
    const refused = await specDiff(repo, '--gate');
    expect(refused.stdout).toContain('against `HEAD~1`');
    expect(refused.code).toBe(1);

    git(repo, 'reset', '-q', '--hard', 'HEAD~1');
    writeFileSync(join(repo, 'openapi.yaml'), edited((d) => (dropRequiredEmail(d), bumpMajor(d))));
    git(repo, 'commit', '-q', '-am', 'breaking, version 1');
    expect((await specDiff(repo, '--gate')).code).toBe(0);
  });

  it('passes with a note in a shallow clone', async () => {
    const clone = mkdtempSync(join(tmpdir(), 'mailroom-spec-diff-clone-'));
    try {
      git(clone, 'clone', '-q', '--depth', '1', `file://${repo}`, '.');
      const { code, stdout } = await specDiff(clone, '--gate');
      expect(stdout).toContain('Nothing to compare');
      expect(code).toBe(0);
    } finally {
      rmSync(clone, { recursive: true, force: true });
    }
  });
});

describe('spec:diff on the contract as it is laid out, a root and the files under openapi/', () => {
  it("bundles the working root with the files it refers to, and compares it with the base's bundle", async () => {
    const split = mkdtempSync(join(tmpdir(), 'mailroom-spec-diff-split-'));
    try {
      git(split, 'init', '-q');
      cpSync(join(root, 'openapi.yaml'), join(split, 'openapi.yaml'));
      cpSync(join(root, 'openapi'), join(split, 'openapi'), { recursive: true });
      mkdirSync(join(split, 'generated'));
      cpSync(join(root, 'generated/openapi.yaml'), join(split, 'generated/openapi.yaml'));
      git(split, 'add', '.');
      git(split, 'commit', '-q', '-m', 'base');

      // Contact is edited where the root says it lives; the root itself stays as it is.
      const [file, pointer] = (yaml.load(readFileSync(join(split, 'openapi.yaml'), 'utf8')) as { components: { schemas: Record<string, { $ref: string }> } }).components.schemas['Contact']!.$ref.split('#/');
      const schemas = yaml.load(readFileSync(join(split, file!), 'utf8')) as Document['components']['schemas'];
      schemas[pointer!]!.required = schemas[pointer!]!.required!.filter((f) => f !== 'email');
      writeFileSync(join(split, file!), yaml.dump(schemas, { lineWidth: -1, noRefs: true }));

      const { code, stdout } = await specDiff(split);
      expect(stdout).toMatch(/\| GET \/contacts \| Properties of `Contact` are no longer required: `email`\. \| `#\/components\/schemas\/Contact\/required`/);
      expect(code).toBe(1);
    } finally {
      rmSync(split, { recursive: true, force: true });
    }
  });
});

it('the reference page shows info.version', () => {
  const { version } = (yaml.load(contract) as Document).info;
  expect(readFileSync(join(root, 'generated/docs.html'), 'utf8')).toContain(`>Mailroom API (${version})</h1>`);
});
