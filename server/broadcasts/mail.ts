// A broadcast's emails as they go out and as they are read back. The outbox row names the broadcast
// and the contact; the message is made from them when it is delivered: whether the contact may still
// be sent to (it exists, has not unsubscribed, is still in the broadcast's segment and subscribed to
// its topic), and the content personalized for it, with the one-click unsubscribe headers of RFC 8058.
import type { EmailRecord } from '../store/emails.ts';
import type { Store } from '../store/index.ts';
import type { RecipientContact } from '../store/recipients.ts';
import { personalize, personalizeSubject, SendingBroadcasts, type Personalized, type Recipient, type SendingBroadcast } from './personalize.ts';
import { unsubscribeUrl, type UnsubscribeTarget, type UnsubscribeTokens } from './unsubscribeToken.ts';

/** What unsubscribe URLs are made of: the signing tokens and the server's public URL. */
export interface UnsubscribeLinks {
  tokens: UnsubscribeTokens;
  /** Read when a URL is made: a server listening on port 0 learns its own URL only once it listens. */
  publicUrl: () => string;
}

/** What becomes of one broadcast email: sent as this record, or withdrawn for this reason, or failed. */
export type BroadcastOutcome = { send: EmailRecord } | { cancel: string } | { fail: string };

export class BroadcastMail {
  constructor(
    private readonly store: Store,
    private readonly links: UnsubscribeLinks,
    private readonly broadcasts = new SendingBroadcasts(),
  ) {}

  /**
   * The outcome of every broadcast email of a claimed batch, by email id. Reads each broadcast once
   * (then from the cache), and the batch's broadcast statuses, contacts and topic choices in one query each.
   */
  async forDelivery(emails: EmailRecord[]): Promise<Map<string, BroadcastOutcome>> {
    const ours = emails.filter((email) => email.broadcast_id !== null);
    const broadcasts = await this.sending(ours.map((email) => email.broadcast_id!));
    // Its status, read now, not cached: a broadcast canceled since these emails were claimed sends none of them.
    const statuses = await this.store.broadcasts.statuses([...broadcasts.keys()]);
    const contacts = await this.store.recipients.contacts(ours.flatMap((email) => (email.contact_id === null ? [] : [email.contact_id])));
    const pairs = ours.flatMap((email) => {
      const topicId = broadcasts.get(email.broadcast_id!)?.topic_id;
      return topicId && email.contact_id && contacts.has(email.contact_id) ? [{ contactId: email.contact_id, topicId }] : [];
    });
    const subscriptions = await this.store.recipients.subscriptions(pairs);
    const members = await this.store.recipients.members(
      ours.flatMap((email) => {
        const segmentId = broadcasts.get(email.broadcast_id!)?.segment_id;
        return segmentId && email.contact_id && contacts.has(email.contact_id) ? [{ contactId: email.contact_id, segmentId }] : [];
      }),
    );
    const outcomes = new Map<string, BroadcastOutcome>();
    for (const email of ours) {
      const broadcast = broadcasts.get(email.broadcast_id!);
      const contact = email.contact_id === null ? undefined : contacts.get(email.contact_id);
      let reason: string | undefined;
      const status = broadcast && statuses.get(broadcast.id);
      if (!broadcast || !status) reason = 'its broadcast no longer exists';
      else if (status === 'canceled') reason = 'the broadcast was canceled';
      else if (!contact) reason = 'the contact was deleted before the email went out';
      // The row was written to the address the contact had then, now perhaps someone else's.
      else if (!addressedTo(email, contact)) reason = "the contact's address changed before the email went out";
      else if (contact.unsubscribed) reason = 'the contact unsubscribed before the email went out';
      else if (!members.has(`${contact.id}/${broadcast.segment_id}`)) reason = "the contact left the broadcast's segment before the email went out";
      else if (broadcast.topic_id && subscriptions.get(`${contact.id}/${broadcast.topic_id}`) !== 'opt_in') {
        reason = "the contact is no longer subscribed to the broadcast's topic";
      }
      if (reason) {
        outcomes.set(email.id, { cancel: reason });
        continue;
      }
      try {
        outcomes.set(email.id, { send: this.message(email, broadcast!, recipientOf(contact!)) });
      } catch (error) {
        outcomes.set(email.id, { fail: `the message could not be built: ${(error as Error).message}` });
      }
    }
    return outcomes;
  }

  /**
   * A broadcast email's content as it reads for its contact; once the contact is gone, with fallbacks
   * and the address alone. undefined when the broadcast is gone, or the content would be too long.
   */
  async forReading(email: EmailRecord): Promise<Personalized | undefined> {
    if (email.broadcast_id === null || email.contact_id === null) return undefined;
    const broadcast = (await this.sending([email.broadcast_id!])).get(email.broadcast_id!);
    if (!broadcast) return undefined;
    const contact = (await this.store.recipients.contacts([email.contact_id])).get(email.contact_id);
    try {
      return personalize(broadcast.prepared, readingRecipient(email, contact), this.url(email, broadcast));
    } catch {
      return undefined;
    }
  }

  /**
   * The subjects of a page of the email log, broadcast emails' personalized as forReading's, by email
   * id: each broadcast read once (then from the cache), the page's contacts in one query. An email not
   * of a broadcast, or whose broadcast is gone, is not in the map.
   */
  async subjectsForReading(emails: Pick<EmailRecord, 'id' | 'broadcast_id' | 'contact_id' | 'to_addresses'>[]): Promise<Map<string, string>> {
    const ours = emails.filter((email) => email.broadcast_id !== null && email.contact_id !== null);
    const subjects = new Map<string, string>();
    if (ours.length === 0) return subjects;
    const broadcasts = await this.sending(ours.map((email) => email.broadcast_id!));
    const contacts = await this.store.recipients.contacts([...new Set(ours.map((email) => email.contact_id!))]);
    for (const email of ours) {
      const broadcast = broadcasts.get(email.broadcast_id!);
      if (!broadcast) continue;
      // The link is made (a signature) only for a subject that shows it.
      const url = broadcast.prepared.subject.some((part) => typeof part !== 'string' && part.name === 'RESEND_UNSUBSCRIBE_URL') ? this.url(email, broadcast) : '';
      try {
        subjects.set(email.id, personalizeSubject(broadcast.prepared, readingRecipient(email, contacts.get(email.contact_id!)), url));
      } catch {
        // Too long once personalized: the stored subject stands.
      }
    }
    return subjects;
  }

  /** The email as it is sent: the personalized content, and the unsubscribe headers. */
  private message(email: EmailRecord, broadcast: SendingBroadcast, recipient: Recipient): EmailRecord {
    const url = this.url(email, broadcast);
    const { subject, html, text } = personalize(broadcast.prepared, recipient, url);
    const headers = { ...(email.headers === null ? {} : JSON.parse(email.headers)), 'List-Unsubscribe': `<${url}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' };
    // text '' means "no plain-text part" to the message builder; null would mean "make one from html".
    return { ...email, subject, html, text: text ?? '', headers: JSON.stringify(headers) };
  }

  private url(email: Pick<EmailRecord, 'contact_id'>, broadcast: SendingBroadcast): string {
    const target: UnsubscribeTarget = broadcast.topic_id
      ? { contactId: email.contact_id!, scope: 'topic', id: broadcast.topic_id }
      : { contactId: email.contact_id!, scope: 'broadcast', id: broadcast.id };
    return unsubscribeUrl(this.links.publicUrl(), this.links.tokens, target);
  }

  /** The broadcasts by id: from the cache, or read (one query each, the first time only). */
  private async sending(ids: string[]): Promise<Map<string, SendingBroadcast>> {
    const found = new Map<string, SendingBroadcast>();
    for (const id of new Set(ids)) {
      const cached = this.broadcasts.get(id);
      if (cached) {
        found.set(id, cached);
        continue;
      }
      const record = await this.store.broadcasts.find(id);
      if (record) found.set(id, this.broadcasts.add(record));
    }
    return found;
  }
}

/** A broadcast email's one recipient, as its row was written. */
const recipientAddress = (email: Pick<EmailRecord, 'to_addresses'>): string => (JSON.parse(email.to_addresses) as string[])[0] ?? '';

/** Whether the email's recipient is still the contact's address (in any case: one mailbox). */
const addressedTo = (email: Pick<EmailRecord, 'to_addresses'>, contact: RecipientContact): boolean => recipientAddress(email).toLowerCase() === contact.email.toLowerCase();

/** Who a broadcast email reads as addressed to: its contact, or once the contact is gone, its address alone. */
function readingRecipient(email: Pick<EmailRecord, 'to_addresses'>, contact: RecipientContact | undefined): Recipient {
  return contact ? recipientOf(contact) : { email: recipientAddress(email), first_name: null, last_name: null, properties: {} };
}

function recipientOf(contact: RecipientContact): Recipient {
  return { email: contact.email, first_name: contact.first_name, last_name: contact.last_name, properties: JSON.parse(contact.properties) };
}
