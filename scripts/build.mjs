// `npm run build`: bundles the server's entry points into build/. Every dependency stays a package
// Node loads from node_modules, except kysely. Its ESM build is some 260 files, and each thread that
// opens a store (the server's and each delivery thread's) would hold all of them as modules of its
// own. Bundled, only the parts Mailroom calls come along (the memory it saves: docs/performance.md).
// Plain JavaScript, so that a production install can build it.
import { readFileSync } from 'node:fs';
import { build } from 'esbuild';

const { dependencies } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

// With arguments, one other entry point and its output file, bundled the same way (the bench's targets).
const [entry, outfile] = process.argv.slice(2);

await build({
  ...(entry ? { entryPoints: [entry], outfile } : { entryPoints: ['server/bin/main.ts', 'server/bin/keys.ts', 'server/bin/worker.ts'], outdir: 'build' }),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // A package named here also keeps its subpaths (ajv/dist/2020) out of the bundle.
  external: Object.keys(dependencies).filter((name) => name !== 'kysely'),
  sourcemap: true,
  logLevel: 'warning',
});
