// Requests Node's HTTP parser refuses before any of our code sees them: a malformed request line or
// header, headers over Node's size limit, a client too slow to send its request, an HTTP/1.1 request
// without Host, an Expect other than 100-continue. Node would answer them with a bare status line;
// they get the contract's error body, as every other refusal does.
import { maxHeaderSize, STATUS_CODES, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ErrorName } from './api.ts';

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
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex & { bytesWritten?: number }) => {
    // As Node does: nothing is written to a client that has gone, or once a response has begun.
    if (error.code === 'ECONNRESET' || !socket.writable || socket.bytesWritten !== 0) return void socket.destroy();
    const [statusCode, name, message] = refusalOf(error.code, timeouts);
    const body = JSON.stringify({ statusCode, message, name });
    const head = [`HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}`, 'Content-Type: application/json; charset=utf-8', `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close'];
    socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
    // A client that does not read its answer is not waited for.
    setTimeout(() => socket.destroy(), 1000).unref();
  });
}

/**
 * The app, behind the refusal of an HTTP/1.1 request without a Host header (RFC 9112 §3.2: a 400), which
 * Node makes with an empty body unless its server is created with `requireHostHeader: false`.
 */
export function requiringHost(app: RequestListener): RequestListener {
  return (req, res) => {
    if (req.httpVersion === '1.1' && !req.headers.host) return refuse(res, 400, 'validation_error', 'The request has no Host header, which HTTP/1.1 requires.');
    return app(req, res);
  };
}

/** Answers an Expect header other than 100-continue (which Node answers itself) with 417, as Node does, with the error body. */
export function answerExpectations(server: Server): void {
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    refuse(res, 417, 'validation_error', 'The request expects what the server does not offer: the only Expect it meets is 100-continue.');
  });
}

function refuse(res: ServerResponse, statusCode: number, name: ErrorName, message: string): void {
  const body = JSON.stringify({ statusCode, message, name });
  res.writeHead(statusCode, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' }).end(body);
}
