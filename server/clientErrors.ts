// Requests Node's HTTP parser refuses before any of our code sees them: a malformed request line or
// header, headers over Node's size limit, a client too slow to send its request. Node would answer
// them with a bare status line; they get the contract's error body, as every other refusal does.
import { maxHeaderSize, STATUS_CODES, type Server } from 'node:http';
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
