// `npm run keys -- create --name NAME [--permission sending_access]`, `keys list`, `keys revoke ID`:
// manage API keys in the store that DATA_DIR or DATABASE_URL names. The last full access key is
// revoked only with --force, as the API never revokes it: with none left, only this command can
// manage the server again.
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { createKey, PERMISSIONS, type Permission } from '../apiKeys/key.ts';
import { loadConfig, type Config } from '../config.ts';
import { postgresPlace, storeFailure } from '../store/storeFailure.ts';
import { loadSpec, schemaCompiler } from '../contract.ts';
import { openStore } from '../store/index.ts';
import { sqliteFileIn } from '../store/sqlite.ts';

const USAGE = `usage:
  npm run keys -- create --name NAME [--permission full_access|sending_access]
  npm run keys -- list
  npm run keys -- revoke ID [--force]
  npm run keys -- --help`;

function fail(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(2);
}

/** The store could not be used: one line, as `npm start` says it, and exit 1. */
function cannotRun(message: string): never {
  process.stderr.write(`Mailroom's keys command could not run: ${message}\n`);
  process.exit(1);
}

function parse() {
  try {
    return parseArgs({
      allowPositionals: true,
      options: { name: { type: 'string' }, permission: { type: 'string', default: 'full_access' }, force: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
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
if (!['create', 'list', 'revoke'].includes(command ?? '')) fail(command ? `unknown command ${command}` : 'no command given');
if (command === 'create') {
  if (!values.name) fail('create needs --name');
  // The contract's own rule for a name (ApiKeyName): one it refuses could never be listed over the API.
  const nameFits = schemaCompiler(loadSpec())('/components/schemas/ApiKeyName');
  if (!nameFits(values.name)) fail(`--name must be what the contract's ApiKeyName allows: ${nameFits.errors?.map((e) => e.message).join(', ')}`);
  if (!PERMISSIONS.includes(values.permission as Permission)) fail(`--permission is one of ${PERMISSIONS.join(', ')}`);
}
if (command === 'revoke' && !id) fail('revoke needs the key id (see keys list)');

function config(): Config {
  try {
    return loadConfig();
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(2);
  }
}

const settings = config();
// Said every time, to stderr: a mistyped DATA_DIR would otherwise manage keys no server ever reads.
const sqliteFile = sqliteFileIn(settings.dataDir);
if (settings.databaseUrl) process.stderr.write(`Store: ${postgresPlace(settings.databaseUrl)} (DATABASE_URL)\n`);
else if (existsSync(sqliteFile)) process.stderr.write(`Store: SQLite ${sqliteFile} (DATA_DIR)\n`);
else if (command === 'create') process.stderr.write(`Store: SQLite ${sqliteFile} (DATA_DIR), a new database: no server has used it yet\n`);
else cannotRun(`there is no SQLite store at ${sqliteFile}: check DATA_DIR (or set DATABASE_URL), or start the server once to create it`);

const store = await openStore(settings).catch(async (error) => cannotRun((await storeFailure(settings, error)).message));
try {
  switch (command) {
    case 'create': {
      const created = await createKey(store, values.name!, values.permission as Permission);
      process.stdout.write(`${created.key}\n`);
      process.stderr.write(`Created key ${created.id} (${values.permission}). The key is shown only this once.\n`);
      break;
    }
    case 'list':
      for (const key of await store.apiKeys.list()) {
        const state = key.revoked_at ? `revoked ${key.revoked_at}` : 'active';
        // A name is anyone's with a full access key: as JSON writes it, so that it cannot move the terminal's cursor or break the line.
        const name = JSON.stringify(key.name).slice(1, -1);
        process.stdout.write(`${key.id}  ${key.key_hint}…  ${key.permission.padEnd(14)}  ${state.padEnd(32)}  ${name}\n`);
      }
      break;
    case 'revoke': {
      const at = new Date().toISOString();
      const outcome = values.force ? ((await store.apiKeys.revoke(id!, at)) ? 'revoked' : 'not_found') : await store.apiKeys.revokeUnlessLast(id!, at);
      if (outcome === 'not_found') fail(`no active key has the id ${id}`);
      if (outcome === 'last_full_access') fail(`${id} is the last full access key: with it revoked, no API key could manage the server. Create another first, or give --force`);
      process.stdout.write(`Revoked ${id}\n`);
      break;
    }
  }
} catch (error) {
  cannotRun((error as Error).message);
} finally {
  await store.close();
}
