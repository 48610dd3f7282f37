// Attachments given by `path`: fetched as the email is accepted, so that what is kept and sent is what
// the URL served then, and a URL that fails refuses the request instead of failing the email later.
// The URL is the caller's choice and the server fetches it from inside its own network, so the rules
// are a webhook endpoint's (server/webhooks/endpoint.ts): https, a public address, every redirect
// judged again; ATTACHMENT_PATH_ALLOW_PRIVATE=true lifts them. All of a request's files together are
// bounded in time and in size (BODY_LIMIT, what a request could have carried as `content`).
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { Schemas } from '../api.ts';
import { invalid } from '../http/errors.ts';
import { quoted } from '../quoted.ts';
import { namesItsHost, nonPublicHost, publicOnlyLookup } from '../webhooks/endpoint.ts';

export interface AttachmentPathOptions {
  allowPrivate: boolean;
  /** For all of a request's files together. */
  timeoutMs: number;
  /** For all of a request's files together. */
  maxBytes: number;
  /** Whether a name fits the contract's `filename`, for the name a URL gives. */
  isFilename: (name: string) => boolean;
}

export type GivenAttachment = Schemas['Attachment'];
export type AttachmentWithContent = GivenAttachment & { content: string };

const MAX_REDIRECTS = 3;
const ALLOWED_BY = 'the server allows http and private addresses with ATTACHMENT_PATH_ALLOW_PRIVATE=true';

class FetchRefused extends Error {}

/** The attachments with every `path` fetched into `content`; a 422 naming the first that could not be. */
export async function withFetchedContent(given: GivenAttachment[] | undefined, options: AttachmentPathOptions): Promise<AttachmentWithContent[] | undefined> {
  if (!given?.some((attachment) => attachment.path !== undefined)) return given as AttachmentWithContent[] | undefined;
  const budget = { bytes: options.maxBytes, until: Date.now() + options.timeoutMs, options };
  const abort = new AbortController();
  try {
    return await Promise.all(
      given.map(async (attachment, index) => {
        if (attachment.path === undefined) return attachment as AttachmentWithContent;
        const { path, ...rest } = attachment;
        // The contract's `format: uri` lets through some that no URL parser takes (`http://`, a port past 65535).
        if (!URL.canParse(path) || !namesItsHost(path)) throw invalid(`The \`attachments.${index}.path\` must be a URL, such as \`https://files.example.com/invoice.pdf\`.`);
        const bytes = await fetchFile(new URL(path), budget, abort.signal).catch((error) => {
          abort.abort(); // the request is refused: the other fetches are of no use
          throw error instanceof FetchRefused ? invalid(`The \`attachments.${index}.path\` could not be fetched: ${error.message}`) : error;
        });
        return { ...rest, filename: rest.filename ?? nameIn(path, options.isFilename), content: bytes.toString('base64') };
      }),
    );
  } finally {
    abort.abort();
  }
}

type Budget = { bytes: number; until: number; options: AttachmentPathOptions };

async function fetchFile(url: URL, budget: Budget, signal: AbortSignal): Promise<Buffer> {
  for (let redirects = 0; ; redirects++) {
    const problem = urlProblem(url, budget.options.allowPrivate);
    if (problem) throw new FetchRefused(problem);
    const answer = await fetchOnce(url, budget, signal);
    if (!('location' in answer)) return answer.bytes;
    if (redirects === MAX_REDIRECTS) throw new FetchRefused(`it redirected more than ${MAX_REDIRECTS} times.`);
    url = answer.location;
  }
}

function urlProblem(url: URL, allowPrivate: boolean): string | undefined {
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) return allowPrivate ? `${quoted(url.href)} is not an http or https URL.` : `${quoted(url.href)} is not https (${ALLOWED_BY}).`;
  if (url.username || url.password) return 'the URL must not hold a user name or password.';
  if (url.port === '0') return 'its port must be from 1 to 65535.';
  const host = allowPrivate ? undefined : nonPublicHost(url);
  return host && `its host ${host}; files are fetched only from public addresses (${ALLOWED_BY}).`;
}

/** One GET: the body, or where a redirect leads. */
function fetchOnce(url: URL, budget: Budget, signal: AbortSignal): Promise<{ bytes: Buffer } | { location: URL }> {
  return new Promise((resolve, reject) => {
    const remainingMs = budget.until - Date.now();
    if (remainingMs <= 0) return reject(tooSlow(budget));
    let timer: NodeJS.Timeout | undefined;
    const fail = (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (error instanceof FetchRefused || signal.aborted) return reject(error);
      const reason = error.code === 'ENOTPUBLIC' ? `${error.message} (${ALLOWED_BY})` : (error.code ?? error.message);
      reject(new FetchRefused(`the request failed: ${reason}.`));
    };
    const succeed = (value: { bytes: Buffer } | { location: URL }) => {
      clearTimeout(timer);
      resolve(value);
    };
    const lookup = budget.options.allowPrivate ? undefined : (publicOnlyLookup as LookupFunction);
    const get = url.protocol === 'https:' ? https.get : http.get;
    const request = get(url, { lookup, signal, agent: false, headers: { accept: '*/*', 'user-agent': 'Mailroom' } }, (response) => {
      const status = response.statusCode ?? 0;
      const location = response.headers.location;
      if (status >= 300 && status < 400 && location !== undefined) {
        request.destroy();
        const next = URL.canParse(location, url) ? new URL(location, url) : undefined;
        return next ? succeed({ location: next }) : fail(new FetchRefused(`it redirected to ${quoted(location)}, which is not a URL.`));
      }
      if (status < 200 || status >= 300) {
        request.destroy();
        return fail(new FetchRefused(`it answered ${status}.`));
      }
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => {
        budget.bytes -= chunk.length;
        if (budget.bytes < 0) request.destroy(new FetchRefused(`the files come to more than ${budget.options.maxBytes} bytes together (BODY_LIMIT).`));
        else chunks.push(chunk);
      });
      response.on('end', () => succeed({ bytes: Buffer.concat(chunks) }));
      response.on('error', fail); // cut off before its end
    });
    request.on('error', fail);
    timer = setTimeout(() => request.destroy(tooSlow(budget)), remainingMs);
  });
}

const tooSlow = (budget: Budget) => new FetchRefused(`the files took longer than ${budget.options.timeoutMs} ms (ATTACHMENT_PATH_TIMEOUT_MS).`);

/** The last segment of the URL's path, decoded, when it can name a file. */
function nameIn(path: string, isFilename: (name: string) => boolean): string | undefined {
  const segment = new URL(path).pathname.split('/').pop() ?? '';
  try {
    const name = decodeURIComponent(segment);
    return isFilename(name) ? name : undefined;
  } catch {
    return undefined; // a malformed escape
  }
}
