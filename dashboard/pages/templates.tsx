// Templates: the list; one template's editor with a preview for the values typed in, publishing
// and deleting. The preview renders with the server's own template code.
import { useMemo, useState } from 'preact/hooks';
import { parseTemplate, render, type Values } from '../../server/templates/render.ts';
import type { MailroomError, MailroomSchemas } from '../api.ts';
import { List, useCursor } from '../list.tsx';
import { useLoad } from '../load.ts';
import { replyToText, replyToValue } from '../replyTo.ts';
import type { Route } from '../route.ts';
import { navigateOnAnswer, useLeaveGuard } from '../router.tsx';
import { useClient } from '../session.tsx';
import { ActionButton, ErrorNote, Form, Link, Loading, MessageFrame, PageHeading, Select, TextArea, TextField, Unreadable, When } from '../ui.tsx';

type Template = MailroomSchemas['Template'];
type Variable = { key: string; type: 'string' | 'number'; fallback: string };
type Draft = { name: string; alias: string; from: string; subject: string; reply_to: string; html: string; text: string; variables: Variable[] };

const draftOf = (t?: Template): Draft => ({
  name: t?.name ?? '',
  alias: t?.alias ?? '',
  from: t?.from ?? '',
  subject: t?.subject ?? '',
  reply_to: replyToText(t?.reply_to),
  html: t?.html ?? '',
  text: t?.text ?? '',
  variables: (t?.variables ?? []).map((v) => ({ key: v.key, type: v.type, fallback: v.fallback_value === null || v.fallback_value === undefined ? '' : String(v.fallback_value) })),
});

const typed = (type: Variable['type'], value: string) => (type === 'number' && value.trim() !== '' && !Number.isNaN(Number(value)) ? Number(value) : value);

/** The request body; an optional field left empty is cleared on update and left out on create. */
function bodyOf(draft: Draft) {
  return {
    name: draft.name,
    html: draft.html,
    alias: draft.alias.trim() || null,
    from: draft.from.trim() || null,
    subject: draft.subject || null,
    reply_to: replyToValue(draft.reply_to) ?? null,
    text: draft.text || null,
    variables: draft.variables
      .filter((v) => v.key.trim())
      .map((v) => ({ key: v.key.trim(), type: v.type, ...(v.fallback !== '' && { fallback_value: typed(v.type, v.fallback) }) })),
  };
}

function Templates() {
  const client = useClient();
  const cursor = useCursor();
  const list = useLoad(() => client.GET('/templates', { params: { query: { limit: 50, ...cursor } } }), [cursor.after, cursor.before]);
  return (
    <>
      <PageHeading title="Templates">
        <Link to="/templates/new">New template</Link>
      </PageHeading>
      <List
        what="templates"
        loaded={list}
        paged={{ path: '/templates' }}
        empty="No templates yet."
        columns={[
          { heading: 'Name', cell: (t) => <Link to={`/templates/${t.id}`}>{t.name}</Link> },
          { heading: 'Alias', cell: (t) => t.alias ?? '' },
          { heading: 'Status', cell: (t) => <span class={`status status-${t.status}`}>{t.status}</span> },
          { heading: 'Changed', cell: (t) => <When iso={t.updated_at} /> },
          { heading: 'Published', cell: (t) => <When iso={t.published_at} /> },
        ]}
      />
    </>
  );
}

function TemplatePage({ id }: Record<string, string>) {
  const client = useClient();
  const template = useLoad(() => client.templates.get(id!), [id]);
  if (template.error) return <Unreadable title="Template" back={['/templates', 'All templates']} error={template.error} />;
  if (!template.data) return <Loading what="the template" />;
  return <Editor template={template.data} key={template.data.updated_at} onChanged={template.reload} />;
}

function Editor({ template, onChanged }: { template?: Template; onChanged?: () => void }) {
  const client = useClient();
  const [draft, setDraft] = useState<Draft>(() => draftOf(template));
  const [error, setError] = useState<MailroomError | null>(null);
  const unsaved = JSON.stringify(draft) !== JSON.stringify(draftOf(template));
  useLeaveGuard(unsaved);
  const field = (name: Exclude<keyof Draft, 'variables'>) => ({ value: draft[name], onValue: (value: string) => setDraft({ ...draft, [name]: value }) });
  const setVariable = (index: number, part: Partial<Variable>) => setDraft({ ...draft, variables: draft.variables.map((v, i) => (i === index ? { ...v, ...part } : v)) });

  async function save() {
    // A fallback without a name would be dropped with its row while the page said it was saved.
    const nameless = draft.variables.findIndex((v) => !v.key.trim() && v.fallback !== '');
    if (nameless >= 0) return setError({ statusCode: 422, name: 'validation_error', message: `Variable ${nameless + 1} has a fallback but no name: name it, or remove it.` });
    const { alias, from, subject, reply_to, text, ...rest } = bodyOf(draft);
    if (!template) {
      const given = { ...rest, ...(alias && { alias }), ...(from && { from }), ...(subject && { subject }), ...(reply_to && { reply_to }), ...(text && { text }) };
      const go = navigateOnAnswer();
      const { data, error } = await client.templates.create(given);
      setError(error ?? null);
      if (data) go(`/templates/${data.id}`, { replace: true });
      return;
    }
    const { error } = await client.PATCH('/templates/{template_id}', { params: { path: { template_id: template.id } }, body: { ...rest, alias, from, subject, reply_to, text } });
    setError(error ?? null);
    if (!error) onChanged?.();
  }

  async function act(call: () => Promise<{ error?: MailroomError }>, after: () => void) {
    const { error } = await call();
    setError(error ?? null);
    if (!error) after();
  }

  return (
    <>
      <PageHeading title={template ? `Template: ${template.name}` : 'New template'}>
        {template && (
          // A status region: publishing changes it, and a screen reader says so.
          <span class={`status status-${template.status}`} role="status">
            {template.status}
          </span>
        )}
        {template && (
          <ActionButton disabled={unsaved} onClick={() => act(() => client.templates.publish(template.id), () => onChanged?.())}>
            Publish
          </ActionButton>
        )}
        {template && (
          <ActionButton
            class="danger"
            onClick={() => {
              if (!confirm(`Delete the template “${template.name}”? Emails already sent from it are not affected.`)) return;
              const go = navigateOnAnswer();
              return act(() => client.DELETE('/templates/{template_id}', { params: { path: { template_id: template.id } } }), () => go('/templates'));
            }}
          >
            Delete template
          </ActionButton>
        )}
      </PageHeading>
      <p>
        <Link to="/templates">All templates</Link>
        {template?.published_at && (
          <>
            {' '}
            · published <When iso={template.published_at} />
            {template.has_unpublished_versions && ', with changes since: publish again to send them'}
          </>
        )}
      </p>
      <div class="columns">
        <Form class="panel" onSubmit={save} aria-label="Template">
          <div class="row">
            <TextField label="Name" {...field('name')} required />
            <TextField label="Alias" {...field('alias')} hint="Lowercase letters, digits, - and _; usable in place of the id." />
          </div>
          <TextField label="From" {...field('from')} />
          <TextField label="Subject" {...field('subject')} />
          <TextField label="Reply-to" {...field('reply_to')} />
          <TextArea label="HTML" {...field('html')} rows={10} hint="Placeholders: {{{NAME}}} or {{{NAME|fallback}}}." />
          <TextArea label="Text" {...field('text')} rows={4} hint="Left empty, the plain text is made from the HTML when it is sent." />
          <fieldset>
            <legend>Variables</legend>
            {draft.variables.map((variable, index) => (
              <div class="row" key={index}>
                <TextField label={`Variable ${index + 1} name`} value={variable.key} onValue={(key) => setVariable(index, { key })} />
                <Select
                  label={`Variable ${index + 1} type`}
                  value={variable.type}
                  onValue={(type) => setVariable(index, { type: type as Variable['type'] })}
                  options={[
                    { value: 'string', label: 'Text' },
                    { value: 'number', label: 'Number' },
                  ]}
                />
                <TextField label={`Variable ${index + 1} fallback`} value={variable.fallback} onValue={(fallback) => setVariable(index, { fallback })} />
                <button type="button" class="secondary" onClick={() => setDraft({ ...draft, variables: draft.variables.filter((_, i) => i !== index) })}>
                  Remove variable {index + 1}
                </button>
              </div>
            ))}
            <button type="button" class="secondary" onClick={() => setDraft({ ...draft, variables: [...draft.variables, { key: '', type: 'string', fallback: '' }] })}>
              Add variable
            </button>
          </fieldset>
          <ErrorNote error={error} />
          <button type="submit">{template ? 'Save template' : 'Create template'}</button>
          {template && unsaved && <p class="field-hint">Unsaved changes: save before publishing.</p>}
        </Form>
        <Preview draft={draft} />
      </div>
    </>
  );
}

/** The subject and HTML for the values typed in, each variable falling back as a send's would. */
function Preview({ draft }: { draft: Draft }) {
  const [given, setGiven] = useState<Record<string, string>>({});
  const declared = bodyOf(draft).variables.map((v) => ({ ...v, fallback_value: v.fallback_value ?? null }));
  const rendered = useMemo(() => {
    const values: Values = new Map(draft.variables.filter((v) => given[v.key]).map((v) => [v.key, typed(v.type, given[v.key]!)]));
    try {
      const options = { maxLength: 1_000_000 };
      return {
        subject: render(parseTemplate(draft.subject), values, declared, { ...options, escape: false }),
        html: render(parseTemplate(draft.html), values, declared, { ...options, escape: true }),
      };
    } catch (failure) {
      return { problem: (failure as Error).message };
    }
  }, [draft, given]);
  return (
    <section class="panel" aria-labelledby="preview-heading">
      <h2 id="preview-heading">Preview</h2>
      {draft.variables
        .filter((v) => v.key.trim())
        .map((v) => (
          <TextField
            key={v.key}
            label={`Value of ${v.key}`}
            value={given[v.key] ?? ''}
            onValue={(value) => setGiven({ ...given, [v.key]: value })}
            placeholder={v.fallback ? `${v.fallback} (fallback)` : 'no fallback'}
          />
        ))}
      {'problem' in rendered ? (
        <p class="error" role="alert">
          {rendered.problem}
        </p>
      ) : (
        <>
          <dl class="facts">
            <dt>Subject</dt>
            <dd data-testid="preview-subject">{rendered.subject}</dd>
          </dl>
          {/* Untrusted HTML: no scripts, no same-origin access, and the dashboard's CSP besides. */}
          <MessageFrame title="Template preview" html={rendered.html} />
        </>
      )}
    </section>
  );
}

export const templateRoutes: Route[] = [
  { path: '/templates', page: Templates },
  { path: '/templates/new', page: () => <Editor /> },
  { path: '/templates/:id', page: TemplatePage },
];
