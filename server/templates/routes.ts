// Templates: create a draft, publish it, retrieve it by id or alias.
import { randomUUID } from 'node:crypto';
import { Router } from 'express';
import type { OperationHandler, Schemas } from '../api.ts';
import { invalidMailbox, mailboxList } from '../emails/mailbox.ts';
import { invalid, notFound, quoted } from '../errors.ts';
import type { Store } from '../store/index.ts';
import type { TemplateRecord } from '../store/templates.ts';

/** What a publish freezes: the content sends are rendered from. */
export type PublishedTemplate = Pick<Schemas['Template'], 'from' | 'subject' | 'reply_to' | 'html' | 'text' | 'variables'>;

export function templateRoutes(store: Store): Router {
  const createTemplate: OperationHandler<'createTemplate'> = async (req, res) => {
    const { name, alias, from, subject, reply_to, html, text, variables = [] } = req.body;
    const keys = variables.map((v) => v.key);
    const repeated = keys.find((key, i) => keys.indexOf(key) !== i);
    if (repeated) throw invalid(`The template variable \`${repeated}\` is declared twice.`);
    const badAddress = invalidMailbox('from', mailboxList(from)) ?? invalidMailbox('reply_to', mailboxList(reply_to));
    if (badAddress) throw invalid(badAddress);
    const now = new Date().toISOString();
    const record: TemplateRecord = {
      id: randomUUID(),
      alias: alias ?? null,
      name,
      status: 'draft',
      from_address: from ?? null,
      subject: subject ?? null,
      reply_to: reply_to === undefined ? null : JSON.stringify(mailboxList(reply_to)),
      html,
      text: text ?? null,
      variables: JSON.stringify(variables.map((v) => ({ key: v.key, type: v.type, fallback_value: v.fallback_value ?? null }))),
      published: null,
      created_at: now,
      updated_at: now,
      published_at: null,
    };
    if (!(await store.templates.insert(record))) throw invalid(`A template with the alias ${quoted(alias!)} already exists.`);
    res.status(201).json({ object: 'template', id: record.id });
  };

  const getTemplate: OperationHandler<'getTemplate'> = async (req, res) => {
    const record = await store.templates.find(req.params.template_id);
    if (!record) throw notFound('Template');
    res.json(toTemplate(record));
  };

  const publishTemplate: OperationHandler<'publishTemplate'> = async (req, res) => {
    const record = await store.templates.find(req.params.template_id);
    if (!record) throw notFound('Template');
    const { from, subject, reply_to, html, text, variables } = toTemplate(record);
    const published: PublishedTemplate = { from, subject, reply_to, html, text, variables };
    await store.templates.publish(record.id, JSON.stringify(published), new Date().toISOString());
    res.json({ object: 'template', id: record.id });
  };

  return Router().post('/', createTemplate).get('/:template_id', getTemplate).post('/:template_id/publish', publishTemplate);
}

function toTemplate(record: TemplateRecord): Schemas['Template'] {
  return {
    object: 'template',
    id: record.id,
    name: record.name,
    alias: record.alias,
    status: record.status,
    from: record.from_address,
    subject: record.subject,
    reply_to: record.reply_to === null ? null : JSON.parse(record.reply_to),
    html: record.html,
    text: record.text,
    variables: JSON.parse(record.variables),
    created_at: record.created_at,
    updated_at: record.updated_at,
    published_at: record.published_at,
  };
}
