// An email's message as it went out: its HTML only in a sandboxed frame, its text, its attachments,
// and in capture mode its header block and raw MIME.
import { useEffect, useState } from 'preact/hooks';
import type { MailroomSchemas } from '../api.ts';
import { useLoad } from '../load.ts';
import { useClient } from '../session.tsx';
import { Loading, MessageFrame } from '../ui.tsx';

/**
 * The raw message, kept only in capture mode: a string, null where there is none, undefined until
 * known. Asked for only once the email has gone out (it has a Message-ID): before, the answer is a
 * 404, which the browser logs as an error.
 */
export function useRawMessage(id: string, sent: boolean | undefined): string | null | undefined {
  const client = useClient();
  const [raw, setRaw] = useState<string | null | undefined>(undefined);
  useEffect(() => {
    if (sent === undefined) return;
    if (!sent) return void setRaw(null);
    let current = true;
    client.GET('/emails/{email_id}/raw', { params: { path: { email_id: id } }, parseAs: 'text' }).then(
      ({ data }) => current && setRaw(typeof data === 'string' ? data : null),
      () => current && setRaw(null),
    );
    return () => {
      current = false;
    };
  }, [id, sent]);
  return raw;
}

/** The raw message's header block, up to its first empty line. */
export function Headers({ raw, sent }: { raw: string | null | undefined; sent: boolean }) {
  const headers = raw ? raw.slice(0, raw.search(/\r?\n\r?\n/) >>> 0) : null;
  return (
    <section class="panel" aria-labelledby="headers">
      <h2 id="headers">Headers</h2>
      {raw === undefined && <Loading what="headers" />}
      {headers ? (
        <pre>{headers}</pre>
      ) : (
        raw === null && <p class="field-hint">{sent ? 'The full headers are kept only for emails delivered to the capture store.' : 'Not sent: there are no headers yet.'}</p>
      )}
    </section>
  );
}

export function Message({ email }: { email: MailroomSchemas['Email'] }) {
  return (
    <section class="panel" aria-labelledby="message">
      <h2 id="message">Message</h2>
      {/* Untrusted HTML: no scripts, no same-origin access, and the dashboard's CSP besides. */}
      {email.html !== null ? <MessageFrame title="Message HTML" html={email.html} /> : <p class="field-hint">No HTML part.</p>}
      {email.text !== null && (
        <>
          <h3>Text</h3>
          <pre>{email.text}</pre>
        </>
      )}
    </section>
  );
}

/** The email's attachments, each a link that saves the file; nothing where it has none. */
export function Attachments({ id }: { id: string }) {
  const client = useClient();
  const attachments = useLoad(() => client.GET('/emails/{email_id}/attachments', { params: { path: { email_id: id } } }), [id]);
  if (!attachments.data?.data.length) return null;
  return (
    <section class="panel" aria-labelledby="attachments">
      <h2 id="attachments">Attachments</h2>
      <ul class="attachments">
        {attachments.data.data.map((a) => (
          <li key={a.id}>
            <a href={a.download_url} download={a.filename ?? ''}>
              {a.filename === null ? '(no name)' : withVisibleDirection(a.filename)}
            </a>{' '}
            <span class="field-hint">
              {a.content_type}, {byteSize(a.size)}
              {a.content_id !== undefined && `, shown in the message as cid:${a.content_id}`}
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}

export function RawMessage({ raw }: { raw: string | null | undefined }) {
  if (!raw) return null;
  return (
    <section class="panel" aria-labelledby="raw">
      <h2 id="raw">Raw message</h2>
      <pre>{raw}</pre>
    </section>
  );
}

/** A size for people: bytes, KB or MB (of 1,000 and 1,000,000 bytes). */
const byteSize = (bytes: number) => (bytes < 1000 ? `${bytes} bytes` : bytes < 1_000_000 ? `${(bytes / 1000).toFixed(1)} KB` : `${(bytes / 1_000_000).toFixed(1)} MB`);

/**
 * A file name with its direction controls shown as their code points: `invoice\u202Efdp.exe` would
 * read as `invoiceexe.pdf`, a program passed off as a document.
 */
const withVisibleDirection = (name: string) => name.replace(/[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g, (c) => `[U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}]`);
