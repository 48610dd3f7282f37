// Requests Node's HTTP parser refuses before any of our code sees them: a malformed request line or
// header, headers over Node's size limit, a client too slow to send its request, an HTTP/1.1 request
// without Host, an Expect other than 100-continue, CONNECT. Node would answer them with a bare status
// line, or none; they get the contract's error body, as every other refusal does. So do request
// targets that are not paths, which Express would answer with an HTML page.
import { maxHeaderSize, STATUS_CODES, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ErrorName } from '../api.ts';

/** The timeouts in force (0 is off; Node times out only with one of them on). */
function allowed({ headersMs, requestMs }: { headersMs: number; requestMs: number }): string {
  const limits = [headersMs > 0 && `${headersMs / 1000} s for its headers`, requestMs > 0 && `${requestMs / 1000} s for all of it`];
  return limits.filter(Boolean).join(', ');
}

function refusalOf(code: string | undefined, timeouts: { headersMs: number; requestMs: number }): [number, ErrorName, string] {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return [431, 'payload_too_large', `The request line and headers come to more than ${maxHeaderSize / 1024} KB, which is more than the server reads.`];
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return [408, 'validation_error', `The request did not arrive in the time the server allows: ${allowed(timeouts)}.`];
    default:
      return [400, 'validation_error', 'The request is not valid HTTP/1.1: its request line, a header or its chunked body is malformed.'];
  }
}

export function answerClientErrors(server: Server, timeouts: { headersMs: number; requestMs: number }): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex & { _httpMessage?: ServerResponse | null }) => {
    // A whole, well-formed request came first in the same packet and is still being answered: its
    // answer goes out first (it may have stored something), then the refusal of what followed it. A
    // request still arriving (a malformed chunk, a body that timed out) is what is refused, at once.
    const answering = socket._httpMessage;
    if (error.code !== 'ECONNRESET' && answering && !answering.writableFinished && answering.req.complete) {
      answering.once('finish', () => (socket.writable ? endWith(socket, ...refusalOf(error.code, timeouts)) : socket.destroy()));
      answering.once('close', () => answering.writableFinished || socket.destroy());
      return;
    }
    // As Node does: nothing is written to a client that has gone, or once a response has begun. (Not
    // bytesWritten, which counts the answers a kept-alive connection gave before.)
    if (error.code === 'ECONNRESET' || !socket.writable || socket._httpMessage?.headersSent) return void socket.destroy();
    endWith(socket, ...refusalOf(error.code, timeouts));
  });
}

/** Writes the error answer straight to a connection Node has handed over, and closes it. */
function endWith(socket: Duplex, statusCode: number, name: ErrorName, message: string, headers: string[] = []): void {
  const body = errorBody(statusCode, name, message);
  const head = [`HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}`, ...headers, 'Content-Type: application/json; charset=utf-8', `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close'];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
  // A client that does not read its answer is not waited for.
  setTimeout(() => socket.destroy(), 1000).unref();
}

const errorBody = (statusCode: number, name: ErrorName, message: string) => JSON.stringify({ statusCode, message, name });

/**
 * The app, behind what Node leaves to it of a request's head (RFC 9112 §3.2):
 * - an HTTP/1.1 request without a Host header is refused (400), which Node does with an empty body
 *   unless its server is created with `requireHostHeader: false`;
 * - a target in absolute form (`http://host/contacts`), which a server must accept, is read as its path;
 * - any other target that is not a path (`*`) is refused, but `OPTIONS *`, which asks about the server
 *   as a whole, is answered; Express would answer them with an HTML page;
 * - a path that begins with more than one slash is read with one.
 */
export function checkingRequestHead(app: RequestListener): RequestListener {
  return (req, res) => {
    if (req.httpVersion === '1.1' && !req.headers.host) return refuse(res, 400, 'validation_error', 'The request has no Host header, which HTTP/1.1 requires.');
    if (!req.url!.startsWith('/')) {
      if (/^https?:\/\//i.test(req.url!) && URL.canParse(req.url!)) {
        const { pathname, search } = new URL(req.url!);
        req.url = pathname + search;
      } else if (req.method === 'OPTIONS' && req.url === '*') {
        return void res.writeHead(204, { allow: SERVER_METHODS }).end();
      } else return refuse(res, 400, 'validation_error', 'The request target must be a path, such as `/contacts`.');
    }
    // A base URL written with a trailing slash (`http://mail.example.com/`, as SDKs are often given
    // one) makes every path begin `//`: one slash is meant, as servers in front usually take it.
    if (req.url!.startsWith('//')) req.url = req.url!.replace(/^\/+/, '/');
    return app(req, res);
  };
}

/** The methods some operation of the server takes. */
const SERVER_METHODS = 'GET, HEAD, POST, PATCH, DELETE, OPTIONS';

/** Answers CONNECT, which no operation takes and Node would answer by closing the connection. */
export function answerConnect(server: Server): void {
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    endWith(socket, 405, 'method_not_allowed', 'The server is not a proxy: it takes no CONNECT.', [`Allow: ${SERVER_METHODS}`]);
  });
}

/** Answers an Expect header other than 100-continue (which Node answers itself) with 417, as Node does, with the error body. */
export function answerExpectations(server: Server): void {
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    refuse(res, 417, 'validation_error', 'The request expects what the server does not offer: the only Expect it meets is 100-continue.');
  });
}

function refuse(res: ServerResponse, statusCode: number, name: ErrorName, message: string): void {
  const body = errorBody(statusCode, name, message);
  res.writeHead(statusCode, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' }).end(body);
}
