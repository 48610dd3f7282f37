// The dashboard's one import site of the client package: every call it makes goes through the typed
// client generated from openapi.yaml, with the signed-in key, to the same origin that served the page.
import { createMailroomClient, type MailroomClient, type MailroomError, type MailroomSchemas, type OperationData } from '../client/index.ts';

export type { MailroomClient, MailroomError, MailroomSchemas, OperationData };

/** What a call answers when the server could not be reached at all, in the contract's error shape, so that pages show it as they show the API's errors. */
const UNREACHABLE: MailroomError = { statusCode: 503, name: 'service_unavailable', message: 'The server could not be reached. Check the connection, then try again.' };

/**
 * A client for `apiKey`. `onKeyRefused` is called when the server answers that the key is not valid
 * (revoked since signing in, say).
 */
export const connect = (apiKey: string, onKeyRefused?: () => void): MailroomClient =>
  createMailroomClient({ baseUrl: location.origin, apiKey, retry: true, fetch: answeringFetch(onKeyRefused) });

/** fetch, answering a failure to reach the server with UNREACHABLE rather than throwing, and telling of a refused key. */
function answeringFetch(onKeyRefused: (() => void) | undefined): typeof fetch {
  return async (input, init) => {
    let response: Response;
    try {
      response = await fetch(input, init);
    } catch (error) {
      if ((error as Error).name === 'AbortError') throw error;
      return Response.json(UNREACHABLE, { status: UNREACHABLE.statusCode });
    }
    if (response.ok) return response;
    // A refusal that is not the contract's error is made one by the client (client/index.ts).
    if (response.status === 403 && onKeyRefused && ((await response.clone().json().catch(() => null)) as MailroomError | null)?.name === 'invalid_api_key') onKeyRefused();
    return response;
  };
}
