// Builds the package into dist/: ES modules and a CommonJS variant, each with declarations, and beside
// each a copy of the contract types generated from openapi.yaml, so that the package stands alone.
// `npm pack` runs it (prepack); `npm run build:client` at the repository root too.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const here = (path) => new URL(path, import.meta.url).pathname;
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

rmSync(here('dist'), { recursive: true, force: true });
for (const config of ['tsconfig.build.json', 'tsconfig.cjs.json']) {
  execFileSync(process.execPath, [tsc, '-p', here(config)], { stdio: 'inherit' });
}
// The declarations import ../generated/schema.js from dist/client/ and dist/cjs/client/.
for (const out of ['dist', 'dist/cjs']) {
  mkdirSync(here(`${out}/generated`), { recursive: true });
  copyFileSync(here('../generated/schema.d.ts'), here(`${out}/generated/schema.d.ts`));
}
// Node and TypeScript read a file's module format from the nearest package.json.
writeFileSync(here('dist/cjs/package.json'), '{ "type": "commonjs" }\n');
