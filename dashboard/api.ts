// The dashboard's one import site of the client package: every call it makes goes through the typed
// client generated from openapi.yaml, with the signed-in key, to the same origin that served the page.
import { createMailroomClient, type MailroomClient, type MailroomError, type MailroomSchemas, type OperationData } from '../client/index.ts';

export type { MailroomClient, MailroomError, MailroomSchemas, OperationData };

export const connect = (apiKey: string): MailroomClient => createMailroomClient({ baseUrl: location.origin, apiKey, retry: true });
