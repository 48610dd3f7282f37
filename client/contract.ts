// The client's one import site of the types generated from openapi.yaml. The package build ships a copy
// of generated/schema.d.ts at the same relative place in dist/, so this import holds there unchanged.
export type { components, operations, paths } from '../generated/schema.js';
