// Reads an endpoint's answer to one webhook post, as HTTP/1.1 frames it (RFC 9112): interim 1xx heads
// skipped, then the head, then a body framed by Content-Length, by chunks, or by the connection
// closing. Endpoints are anyone's servers, so every part has a bound, and anything this reader cannot
// frame exactly fails the answer and the connection is not used again: a stray byte left on a kept
// connection would be read as the next post's answer.

/** The head's size limit, as Node's own HTTP parser has it. */
const HEAD_BYTES = 16 * 1024;
/** A chunk-size line, extensions included. */
const CHUNK_LINE_BYTES = 1024;

export interface AnswerHead {
  status: number;
  location?: string;
}

export class AnswerError extends Error {}

type Framing = { kind: 'none' } | { kind: 'length'; left: number } | { kind: 'chunked' } | { kind: 'close' };
type Step = 'head' | 'body' | 'chunk-size' | 'chunk-data' | 'chunk-end' | 'trailers' | 'done';

export class AnswerReader {
  head: AnswerHead | undefined;
  /** Whether the connection may carry the next post once this answer is read to its end. */
  reusable = true;
  private step: Step = 'head';
  private pending: Buffer = Buffer.alloc(0);
  private framing: Framing = { kind: 'none' };
  private chunkLeft = 0;
  private trailerBytes = 0;

  constructor(private readonly on: { head(head: AnswerHead): void; body(bytes: Buffer): void }) {}

  get done(): boolean {
    return this.step === 'done';
  }

  /** Takes the next bytes off the connection; throws an AnswerError when they cannot be an answer. */
  read(bytes: Buffer): void {
    if (this.done) this.fail('bytes after the end of the answer');
    this.pending = this.pending.length === 0 ? bytes : Buffer.concat([this.pending, bytes]);
    while (this.pending.length > 0 && !this.done && this.advance());
    if (this.done && this.pending.length > 0) this.fail('bytes after the end of the answer');
  }

  /** The connection closed: that ends a body framed by closing; any other unfinished answer fails. */
  closed(): void {
    if (this.step === 'done') return;
    if (this.step === 'body' && this.framing.kind === 'close') return this.finish();
    this.fail(this.head ? 'the connection closed before the end of the answer' : 'the connection closed before an answer');
  }

  /** One step on what is pending; false when it needs more bytes. */
  private advance(): boolean {
    switch (this.step) {
      case 'head':
        return this.readHead();
      case 'body':
        return this.readBody();
      case 'chunk-size':
        return this.readChunkSize();
      case 'chunk-data':
        return this.readChunkData();
      case 'chunk-end':
        return this.readChunkEnd();
      case 'trailers':
        return this.readTrailers();
      default:
        return false;
    }
  }

  private readHead(): boolean {
    const end = this.pending.indexOf('\r\n\r\n');
    if (end < 0) {
      if (this.pending.length > HEAD_BYTES) this.fail(`a head over ${HEAD_BYTES} bytes`);
      return false;
    }
    if (end > HEAD_BYTES) this.fail(`a head over ${HEAD_BYTES} bytes`);
    const [statusLine, ...lines] = this.pending.toString('latin1', 0, end).split('\r\n');
    this.pending = this.pending.subarray(end + 4);
    const status = /^HTTP\/1\.([01]) ([1-9]\d\d)(?: [^\r\n]*)?$/.exec(statusLine!);
    if (!status) this.fail(`a status line of ${JSON.stringify(statusLine!.slice(0, 40))}`);
    const code = Number(status![2]);
    if (code === 101) this.fail('a switch of protocols nobody asked for');
    const fields = fieldsOf(lines, (reason) => this.fail(reason));
    // 100 Continue, 103 Early Hints: the answer proper follows.
    if (code < 200) return true;
    if (status![1] === '0' || /(^|,)\s*close\s*(,|$)/i.test(fields.get('connection') ?? '')) this.reusable = false;
    this.framing = this.framingOf(code, fields);
    this.head = { status: code, ...(fields.has('location') && { location: fields.get('location') }) };
    this.on.head(this.head);
    if (this.framing.kind === 'none' || (this.framing.kind === 'length' && this.framing.left === 0)) this.finish();
    else this.step = this.framing.kind === 'chunked' ? 'chunk-size' : 'body';
    return true;
  }

  private framingOf(status: number, fields: Map<string, string>): Framing {
    if (status === 204 || status === 304) return { kind: 'none' };
    const coding = fields.get('transfer-encoding');
    if (coding !== undefined) {
      // With both, the coding frames the body and the length is a lie someone may rely on (RFC 9112 6.3).
      if (fields.has('content-length')) this.reusable = false;
      if (/(^|,)\s*chunked\s*$/i.test(coding)) return { kind: 'chunked' };
      this.reusable = false;
      return { kind: 'close' };
    }
    const length = fields.get('content-length');
    if (length === undefined) {
      this.reusable = false;
      return { kind: 'close' };
    }
    // A repeated header arrives joined with commas; every copy must say the same.
    const values = new Set(length.split(',').map((value) => value.trim()));
    const [only] = values;
    if (values.size !== 1 || !/^\d{1,15}$/.test(only!)) this.fail(`a Content-Length of ${JSON.stringify(length.slice(0, 40))}`);
    return { kind: 'length', left: Number(only) };
  }

  private readBody(): boolean {
    if (this.framing.kind === 'close') {
      this.on.body(this.take(this.pending.length));
      return true;
    }
    const framing = this.framing as { left: number };
    const bytes = this.take(Math.min(framing.left, this.pending.length));
    framing.left -= bytes.length;
    this.on.body(bytes);
    if (framing.left === 0) this.finish();
    return true;
  }

  private readChunkSize(): boolean {
    const line = this.line(CHUNK_LINE_BYTES, 'a chunk-size line');
    if (line === undefined) return false;
    const size = /^([0-9a-fA-F]{1,8})[ \t]*(?:;.*)?$/.exec(line);
    if (!size) this.fail(`a chunk size of ${JSON.stringify(line.slice(0, 40))}`);
    this.chunkLeft = parseInt(size![1]!, 16);
    this.step = this.chunkLeft === 0 ? 'trailers' : 'chunk-data';
    return true;
  }

  private readChunkData(): boolean {
    const bytes = this.take(Math.min(this.chunkLeft, this.pending.length));
    this.chunkLeft -= bytes.length;
    this.on.body(bytes);
    if (this.chunkLeft === 0) this.step = 'chunk-end';
    return true;
  }

  private readChunkEnd(): boolean {
    if (this.pending.length < 2) return false;
    if (this.pending[0] !== 0x0d || this.pending[1] !== 0x0a) this.fail('a chunk not followed by CRLF');
    this.pending = this.pending.subarray(2);
    this.step = 'chunk-size';
    return true;
  }

  /** Trailer fields, read and ignored, up to the empty line that ends the answer. */
  private readTrailers(): boolean {
    const line = this.line(HEAD_BYTES, 'a trailer');
    if (line === undefined) return false;
    this.trailerBytes += line.length + 2;
    if (this.trailerBytes > HEAD_BYTES) this.fail(`trailers over ${HEAD_BYTES} bytes`);
    if (line === '') this.finish();
    return true;
  }

  /** The next line without its CRLF, or undefined until it is all here. */
  private line(limit: number, what: string): string | undefined {
    const end = this.pending.indexOf('\r\n');
    if (end < 0 ? this.pending.length > limit : end > limit) this.fail(`${what} over ${limit} bytes`);
    if (end < 0) return undefined;
    const line = this.pending.toString('latin1', 0, end);
    this.pending = this.pending.subarray(end + 2);
    return line;
  }

  private take(length: number): Buffer {
    const bytes = this.pending.subarray(0, length);
    this.pending = this.pending.subarray(length);
    return bytes;
  }

  private finish(): void {
    this.step = 'done';
  }

  private fail(reason: string): never {
    this.reusable = false;
    throw new AnswerError(`the answer is not HTTP/1.1 this server can read: ${reason}`);
  }
}

/** The header fields by lower-case name, repeated ones joined with commas. */
function fieldsOf(lines: string[], fail: (reason: string) => never): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of lines) {
    // A line folded onto the previous one (obs-fold) is refused, as RFC 9112 5.2 allows.
    const field = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*(.*?)[ \t]*$/.exec(line);
    if (!field) fail(`a header line of ${JSON.stringify(line.slice(0, 40))}`);
    const name = field![1]!.toLowerCase();
    const earlier = fields.get(name);
    fields.set(name, earlier === undefined ? field![2]! : `${earlier}, ${field![2]}`);
  }
  return fields;
}
