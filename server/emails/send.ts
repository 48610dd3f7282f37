// Sending, whatever door the email came in by: the HTTP operations call these, and so can anything
// else that takes mail for sending. Each composes the emails (templates, the rules no schema states),
// checks who may send from where, and stores them in the outbox with the answer, all under the
// Idempotency-Key when one is given (server/emails/idempotency.ts).
import type { Logger } from 'pino';
import type { SuccessBody } from '../api.ts';
import type { Senders } from '../domains/senders.ts';
import { refusedEmail } from '../http/errors.ts';
import type { ApiKeyRecord } from '../store/apiKeys.ts';
import type { EmailAttachment, EmailRecord } from '../store/emails.ts';
import { ClaimLostError } from '../store/idempotency.ts';
import type { Store } from '../store/index.ts';
import { sendTime } from '../schedule.ts';
import { withFetchedContent, type AttachmentPathOptions } from './attachmentPath.ts';
import { composeBatch, type TriagedBatch } from './batch.ts';
import { attachmentsOf, composeEmail, memoized, type OutgoingEmail } from './compose.ts';
import { concurrentRequest, onceForKey, type Answer, type IdempotencyClaim } from './idempotency.ts';

/** Who is sending: the API key, and the Idempotency-Key it gave, if any. */
export interface Sender {
  apiKey: ApiKeyRecord;
  idempotencyKey?: string;
}

type Sent = SuccessBody<'sendEmail'>;
type BatchSent = SuccessBody<'sendBatchEmails'>;

export class EmailSending {
  constructor(
    private readonly store: Store,
    private readonly senders: Senders,
    private readonly attachmentPaths: AttachmentPathOptions,
    private readonly logger: Logger,
  ) {}

  /** One email, now or at its `scheduled_at`. */
  send(email: OutgoingEmail, by: Sender): Promise<Answer<Sent>> {
    const request = by.idempotencyKey === undefined ? undefined : { owner: by.apiKey.id, scope: 'POST /emails', key: by.idempotencyKey, payload: email };
    return onceForKey(this.store, this.logger, request, async (claim) => {
      const now = new Date();
      const composed = await composeEmail(email, this.findTemplate(), now, await sendTime(email.scheduled_at, now));
      if (typeof composed === 'string') throw refusedEmail(composed);
      await this.senders.check([composed.from_address], by.apiKey);
      const attachments = await withFetchedContent(email.attachments, this.attachmentPaths);
      return this.accept([composed], { status: 200, body: { id: composed.id } }, claim, attachmentsOf(composed.id, attachments));
    });
  }

  /** A batch's emails that passed triage (batchTriage), with what triage set aside. */
  sendBatch(emails: OutgoingEmail[], triaged: TriagedBatch, by: Sender): Promise<Answer<BatchSent>> {
    const request = by.idempotencyKey === undefined ? undefined : { owner: by.apiKey.id, scope: 'POST /emails/batch', key: by.idempotencyKey, payload: triaged.given, mode: triaged.mode };
    return onceForKey(this.store, this.logger, request, async (claim) => {
      const { accepted, errors } = await composeBatch(emails, triaged, this.findTemplate(), new Date());
      await this.senders.check(accepted.map((email) => email.from_address), by.apiKey);
      const data = accepted.map(({ id }) => ({ id }));
      const answer = { status: 200, body: triaged.mode === 'permissive' ? { data, errors } : { data } };
      // Every email refused by the rules no schema states: nothing to store, and the key is given back.
      return accepted.length === 0 ? answer : this.accept(accepted, answer, claim);
    });
  }

  private findTemplate() {
    return memoized((id) => this.store.templates.find(id));
  }

  /** Commits the emails, and the answer with the claim, before anything is answered. */
  private async accept<Body>(records: EmailRecord[], answer: Answer<Body>, claim: IdempotencyClaim | undefined, attachments?: EmailAttachment[]): Promise<Answer<Body>> {
    await this.store.acceptEmails(records, claim && { claim, ...answer }, attachments).catch((error) => {
      throw error instanceof ClaimLostError ? concurrentRequest() : error; // another request took the key over
    });
    if (claim) claim.completed = true;
    return answer;
  }
}
