// Bounce and complaint reports as raw RFC 5322 text, written the way MTAs and mailbox providers'
// feedback loops write them: a delivery status notification (RFC 3464) as Postfix sends one, and an
// ARF complaint report (RFC 5965) with the original message attached; and the inbound listener they
// are mailed to, with nodemailer, as a remote MTA mails them.
import { createTransport } from 'nodemailer';
import { pino } from 'pino';
import { startInbound, type InboundListener } from '../../server/inbound/listener.ts';
import type { TestServer } from './server.ts';
import { forTheBlock } from './suite.ts';

/** The inbound listener on 127.0.0.1, over the test server's store, for the describe block. */
export function withInbound(server: TestServer): InboundListener {
  return forTheBlock('the inbound listener', () => startInbound(server.store, pino({ level: 'silent' }), { port: 0, host: '127.0.0.1' }), (listener) => listener.close());
}

/** Mails `raw` to `listener` as a remote MTA mails a report: from the null return path. */
export async function mailReport(listener: InboundListener, raw: string, to: string) {
  const transport = createTransport({ host: '127.0.0.1', port: listener.port, secure: false, ignoreTLS: true });
  try {
    return await transport.sendMail({ envelope: { from: '', to: [to] }, raw });
  } finally {
    transport.close();
  }
}

/** A DSN as Postfix writes one: a human part, the delivery-status fields, the returned headers. */
export function dsn(o: { emailId?: string; envelopeId?: string; recipients: { address: string; action: string; status: string; diagnostic?: string }[] }): string {
  const perRecipient = o.recipients
    .map((r) =>
      [`Final-Recipient: rfc822; ${r.address}`, `Original-Recipient: rfc822;${r.address}`, `Action: ${r.action}`, `Status: ${r.status}`, 'Remote-MTA: dns; mx.example.net', ...(r.diagnostic ? [`Diagnostic-Code: smtp; ${r.diagnostic}`] : [])].join('\r\n'),
    )
    .join('\r\n\r\n');
  return [
    'Return-Path: <>',
    'Date: Sat, 21 Nov 2026 10:06:12 +0000 (UTC)',
    'From: MAILER-DAEMON@relay.example.net (Mail Delivery System)',
    'Subject: Undelivered Mail Returned to Sender',
    'To: bounces@acme.dev',
    'Auto-Submitted: auto-replied',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status;',
    '\tboundary="8F2A61C0B1.1763719572/relay.example.net"',
    'Message-Id: <20261121100612.8F2A61C0B1@relay.example.net>',
    '',
    'This is a MIME-encapsulated message.',
    '',
    '--8F2A61C0B1.1763719572/relay.example.net',
    'Content-Description: Notification',
    'Content-Type: text/plain; charset=us-ascii',
    '',
    'This is the mail system at host relay.example.net.',
    '',
    "I'm sorry to have to inform you that your message could not",
    'be delivered to one or more recipients.',
    '',
    '--8F2A61C0B1.1763719572/relay.example.net',
    'Content-Description: Delivery report',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; relay.example.net',
    'X-Postfix-Queue-ID: 8F2A61C0B1',
    ...(o.envelopeId ? [`Original-Envelope-Id: ${o.envelopeId}`] : []),
    'Arrival-Date: Sat, 21 Nov 2026 10:06:10 +0000 (UTC)',
    '',
    perRecipient,
    '',
    '--8F2A61C0B1.1763719572/relay.example.net',
    'Content-Description: Undelivered Message Headers',
    'Content-Type: text/rfc822-headers',
    '',
    'From: Acme <team@acme.dev>',
    `To: ${o.recipients[0]!.address}`,
    'Subject: Hello',
    ...(o.emailId ? [`Message-ID: <${o.emailId}@acme.dev>`] : []),
    'Date: Sat, 21 Nov 2026 10:06:05 +0000',
    '',
    '--8F2A61C0B1.1763719572/relay.example.net--',
    '',
  ].join('\r\n');
}

/** An ARF complaint as a mailbox provider's feedback loop writes one, with the original message attached. */
export function arf(o: { emailId?: string; returnPath?: string; rcptTo?: string; to: string }): string {
  return [
    'From: <staff@hotmail.example>',
    'Date: Sat, 21 Nov 2026 11:00:00 +0000',
    'Subject: complaint about message from 203.0.113.7',
    'To: <abuse@acme.dev>',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=feedback-report;',
    '     boundary="part1_13d.2e68ed54_boundary"',
    '',
    '--part1_13d.2e68ed54_boundary',
    'Content-Type: text/plain; charset="US-ASCII"',
    'Content-Transfer-Encoding: 7bit',
    '',
    'This is an email abuse report for an email message received from IP',
    '203.0.113.7 on Sat, 21 Nov 2026 10:07:00 +0000.',
    '',
    '--part1_13d.2e68ed54_boundary',
    'Content-Type: message/feedback-report',
    '',
    'Feedback-Type: abuse',
    'User-Agent: SomeGenerator/1.0',
    'Version: 1',
    ...(o.returnPath ? [`Original-Mail-From: <${o.returnPath}>`] : []),
    ...(o.rcptTo ? [`Original-Rcpt-To: <${o.rcptTo}>`] : []),
    'Received-Date: Sat, 21 Nov 2026 10:07:00 +0000',
    'Source-IP: 203.0.113.7',
    'Reported-Domain: acme.dev',
    '',
    '--part1_13d.2e68ed54_boundary',
    'Content-Type: message/rfc822',
    'Content-Disposition: inline',
    '',
    'From: Acme <team@acme.dev>',
    `To: ${o.to}`,
    'Subject: Hello',
    ...(o.emailId ? [`Message-ID: <${o.emailId}@acme.dev>`] : []),
    'Date: Sat, 21 Nov 2026 10:06:05 +0000',
    '',
    'Hi',
    '',
    '--part1_13d.2e68ed54_boundary--',
    '',
  ].join('\r\n');
}
