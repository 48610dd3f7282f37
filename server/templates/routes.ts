// Templates: create a draft, change it, publish it, duplicate it, list, retrieve and delete them by id or alias.
import { randomUUID } from 'node:crypto';
import type { OperationHandler, Schemas } from '../api.ts';
import { invalidMailbox, mailboxColumn, mailboxList } from '../emails/mailbox.ts';
import { invalid, notFound } from '../http/errors.ts';
import { quoted } from '../quoted.ts';
import { cursorOf, listing } from '../http/paging.ts';
import type { StreamedLists } from '../http/streamedList.ts';
import type { Store } from '../store/index.ts';
import type { TemplateRecord, TemplateSummaryRecord } from '../store/templates.ts';
import type { Handlers } from '../http/operationRouter.ts';

/** What a publish freezes: the content sends are rendered from. */
export type PublishedTemplate = Pick<Schemas['Template'], 'from' | 'subject' | 'reply_to' | 'html' | 'text' | 'variables'>;

/** `lists` writes the list asked for without `limit`. */
export function templateHandlers(store: Store, lists: StreamedLists): Handlers {
  const streamTemplates = lists.of('TemplateList', toSummary);

  const createTemplate: OperationHandler<'createTemplate'> = async (req, res) => {
    const { name, alias, from, subject, reply_to, html, text, variables = [] } = req.body;
    checkVariables(variables);
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
      reply_to: mailboxColumn(mailboxList(reply_to)),
      html,
      text: text ?? null,
      variables: storedVariables(variables),
      published: null,
      created_at: now,
      updated_at: now,
      published_at: null,
    };
    if (!(await store.templates.insert(record))) throw invalid(`A template with the alias ${quoted(alias!)} already exists.`);
    res.status(201).json({ object: 'template', id: record.id });
  };

  const listTemplates: OperationHandler<'listTemplates'> = async (req, res) => {
    const { limit } = req.query;
    const cursor = cursorOf(req.query);
    if (limit === undefined) return listing('template', () => streamTemplates(res, store.templates.stream(cursor)));
    const page = await listing('template', () => store.templates.page(limit, cursor));
    res.json({ object: 'list', has_more: page.hasMore, data: page.records.map(toSummary) });
  };

  // Changes the draft only: sends keep using the published version until the next publish.
  const updateTemplate: OperationHandler<'updateTemplate'> = async (req, res) => {
    const record = await store.templates.find(req.params.template_id);
    if (!record) throw notFound('Template');
    const { name, alias, from, subject, reply_to, html, text, variables } = req.body;
    if (variables) checkVariables(variables);
    const badAddress = invalidMailbox('from', mailboxList(from)) ?? invalidMailbox('reply_to', mailboxList(reply_to));
    if (badAddress) throw invalid(badAddress);
    const outcome = await store.templates.update(
      record.id,
      {
        ...(name !== undefined && { name }),
        ...(alias !== undefined && { alias }),
        ...(from !== undefined && { from_address: from }),
        ...(subject !== undefined && { subject }),
        ...(reply_to !== undefined && { reply_to: mailboxColumn(mailboxList(reply_to)) }),
        ...(html !== undefined && { html }),
        ...(text !== undefined && { text }),
        ...(variables !== undefined && { variables: storedVariables(variables) }),
      },
      new Date().toISOString(),
    );
    if (outcome === 'alias_taken') throw invalid(`A template with the alias ${quoted(alias!)} already exists.`);
    res.json({ object: 'template', id: record.id });
  };

  const deleteTemplate: OperationHandler<'deleteTemplate'> = async (req, res) => {
    const record = await store.templates.find(req.params.template_id);
    if (!record || !(await store.templates.remove(record.id))) throw notFound('Template');
    res.json({ object: 'template', id: record.id, deleted: true });
  };

  const getTemplate: OperationHandler<'getTemplate'> = async (req, res) => {
    const record = await store.templates.find(req.params.template_id);
    if (!record) throw notFound('Template');
    res.json(toTemplate(record));
  };

  const publishTemplate: OperationHandler<'publishTemplate'> = async (req, res) => {
    const record = await store.templates.find(req.params.template_id);
    if (!record) throw notFound('Template');
    await store.templates.publish(record.id, JSON.stringify(draftOf(record)), new Date().toISOString());
    res.json({ object: 'template', id: record.id });
  };

  const duplicateTemplate: OperationHandler<'duplicateTemplate'> = async (req, res) => {
    const record = await store.templates.find(req.params.template_id);
    if (!record) throw notFound('Template');
    const now = new Date().toISOString();
    // Its draft, as a draft of its own: an alias names one template, and the copy is not yet published.
    const copy: TemplateRecord = { ...record, id: randomUUID(), alias: null, status: 'draft', published: null, created_at: now, updated_at: now, published_at: null };
    await store.templates.insert(copy);
    res.json({ object: 'template', id: copy.id });
  };

  return { listTemplates, createTemplate, getTemplate, updateTemplate, deleteTemplate, publishTemplate, duplicateTemplate };
}

type Variables = Schemas['TemplateVariable'][];

function checkVariables(variables: Variables): void {
  const keys = variables.map((v) => v.key);
  const repeated = keys.find((key, i) => keys.indexOf(key) !== i);
  if (repeated) throw invalid(`The template variable \`${repeated}\` is declared twice.`);
  // A fallback stands in for a value given at send, so it must be what such a value must be.
  const mistyped = variables.find((v) => v.fallback_value != null && typeof v.fallback_value !== v.type);
  if (mistyped) throw invalid(`The \`fallback_value\` of the template variable \`${mistyped.key}\` must be a ${mistyped.type}, as its \`type\` says.`);
}

const storedVariables = (variables: Variables) => JSON.stringify(variables.map((v) => ({ key: v.key, type: v.type, fallback_value: v.fallback_value ?? null })));

function toSummary({ id, name, alias, status, created_at, updated_at, published_at }: TemplateSummaryRecord): Schemas['TemplateSummary'] {
  return { object: 'template', id, name, alias, status, created_at, updated_at, published_at };
}

/** The draft's content, as a publish keeps it for sends. */
function draftOf(record: TemplateRecord): PublishedTemplate {
  return {
    from: record.from_address,
    subject: record.subject,
    reply_to: record.reply_to === null ? null : JSON.parse(record.reply_to),
    html: record.html,
    text: record.text,
    variables: JSON.parse(record.variables),
  };
}

function toTemplate(record: TemplateRecord): Schemas['Template'] {
  const draft = draftOf(record);
  return {
    object: 'template',
    id: record.id,
    name: record.name,
    alias: record.alias,
    status: record.status,
    ...draft,
    // What sends use is the published version, kept as the draft was at the last publish.
    has_unpublished_versions: record.published !== null && record.published !== JSON.stringify(draft),
    created_at: record.created_at,
    updated_at: record.updated_at,
    published_at: record.published_at,
  };
}
