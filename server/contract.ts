// The contract at run time: openapi.yaml loaded once, its schemas compiled with Ajv, so that every
// runtime check outside express-openapi-validator comes from the spec itself, never restated.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { OpenAPIFramework } from 'express-openapi-validator/dist/framework/index.js';
import { load } from 'js-yaml';

// ajv-formats is CommonJS; under NodeNext its default export is the module object.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

export const specPath = fileURLToPath(new URL('../openapi.yaml', import.meta.url));

export type OpenApiDocument = {
  openapi: string;
  paths: Record<string, Record<string, unknown>>;
  components: Record<string, Record<string, unknown>>;
  [key: string]: unknown;
};

export function loadSpec(path: string = specPath): OpenApiDocument {
  // js-yaml rather than yaml: it parses the contract with half the memory, and start-up memory counts.
  return load(readFileSync(path, 'utf8')) as OpenApiDocument;
}

const SPEC_ID = 'mailroom:openapi';

/** Compiles any schema inside the document, addressed by JSON pointer (`/components/schemas/Contact`). */
export function schemaCompiler(spec: OpenApiDocument): (pointer: string) => ValidateFunction {
  // strict: false because OpenAPI adds keywords JSON Schema does not know (example, discriminator);
  // verbose keeps the failing schema with each error, so that messages can quote its description.
  const ajv = new Ajv2020({ allErrors: true, strict: false, validateSchema: false, verbose: true });
  addFormats(ajv);
  ajv.addSchema(spec as object, SPEC_ID);
  return (pointer) => ajv.compile({ $ref: `${SPEC_ID}#${pointer}` });
}

/** Follows local `$ref`s until it reaches a node that is not a reference. */
export function resolveRef<T = any>(spec: OpenApiDocument, node: any): T {
  while (node && typeof node.$ref === 'string') {
    node = node.$ref
      .slice(2)
      .split('/')
      .reduce((at: any, key: string) => at?.[key.replaceAll('~1', '/').replaceAll('~0', '~')], spec);
  }
  return node;
}

/**
 * Checks the document the way express-openapi-validator will, but now: the validator loads its spec on
 * the first request, and a broken contract must stop the server at start, not answer 500 later.
 */
export async function assertValidSpec(spec: OpenApiDocument): Promise<void> {
  await new OpenAPIFramework({ apiDoc: structuredClone(spec) as any, validateApiSpec: true }).initialize({});
}
