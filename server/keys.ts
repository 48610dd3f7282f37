// `npm run keys -- create --name NAME [--permission sending_access]`, `keys list`, `keys revoke ID`:
// manage API keys in the store that DATA_DIR or DATABASE_URL names.
import { parseArgs } from 'node:util';
import { createKey, PERMISSIONS, type Permission } from './apiKeys/key.ts';
import { loadConfig } from './config.ts';
import { openStore } from './store/index.ts';

const USAGE = `usage:
  npm run keys -- create --name NAME [--permission full_access|sending_access]
  npm run keys -- list
  npm run keys -- revoke ID
  npm run keys -- --help`;

function fail(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(2);
}

function parse() {
  try {
    return parseArgs({
      allowPositionals: true,
      options: { name: { type: 'string' }, permission: { type: 'string', default: 'full_access' }, help: { type: 'boolean', short: 'h' } },
    });
  } catch (error) {
    // parseArgs explains what was wrong in one line; the stack trace would only bury it.
    return fail((error as Error).message);
  }
}

const { positionals, values } = parse();
if (values.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const [command, id] = positionals;

function config() {
  try {
    return loadConfig();
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(2);
  }
}

const store = await openStore(config());
try {
  switch (command) {
    case 'create': {
      if (!values.name) fail('create needs --name');
      if (!PERMISSIONS.includes(values.permission as Permission)) fail(`--permission is one of ${PERMISSIONS.join(', ')}`);
      const created = await createKey(store, values.name, values.permission as Permission);
      process.stdout.write(`${created.key}\n`);
      process.stderr.write(`Created key ${created.id} (${values.permission}). The key is shown only this once.\n`);
      break;
    }
    case 'list':
      for (const key of await store.apiKeys.list()) {
        const state = key.revoked_at ? `revoked ${key.revoked_at}` : 'active';
        process.stdout.write(`${key.id}  ${key.key_hint}…  ${key.permission.padEnd(14)}  ${state.padEnd(32)}  ${key.name}\n`);
      }
      break;
    case 'revoke':
      if (!id) fail('revoke needs the key id (see keys list)');
      if (!(await store.apiKeys.revoke(id, new Date().toISOString()))) fail(`no active key has the id ${id}`);
      process.stdout.write(`Revoked ${id}\n`);
      break;
    default:
      fail(command ? `unknown command ${command}` : 'no command given');
  }
} finally {
  await store.close();
}
