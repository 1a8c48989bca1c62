// Create or edit one of the provider's offers. The whole form is checked in
// the browser first (offer-rules.js) and every problem listed at once, in
// plain words, beside its field and in the summary; what the catalog still
// refuses is reworded the same way. Edits are kept as a draft in this tab
// (an expired session or a reload loses nothing), leaving with unsaved
// changes asks first, and a conflicting save shows what changed and lets
// the provider keep theirs or take the other version.

import { getOffer, saveOffer } from '../api.js';
import { discardDraft, loadDraft, saveDraft } from '../drafts.js';
import { formatTime, h, replaceChildren } from '../dom.js';
import { field, matchFieldPath } from '../fields.js';
import { normalizeOffer, planOrder } from '../model.js';
import { offerProblems, plainServerMessage } from '../offer-rules.js';
import { OfferFileError, offerDocument, readOfferFile, toYaml } from '../offer-file.js';
import { currentSession } from '../session.js';
import { noteOwnWrite } from '../plan-activity.js';
import { errorSummary } from './error-summary.js';
import { createPlanEditor } from './plan-editor.js';
import { handleExpiredSession } from './provider.js';

const OFFER_TYPES = ['compute', 'storage', 'memory', 'gpu', 'general-purpose'];

/** An offer (normalised) as the editor's form state. */
function formOf(offer) {
  return {
    id: offer.id,
    name: offer.raw.name ?? '',
    type: offer.type,
    description: offer.description,
    plans: [...offer.plans].sort(planOrder).map((plan) => ({
      key: plan.key, name: plan.name, cost: plan.cost, rows: plan.resources.map((r) => ({ name: r.name, value: r.value })),
    })),
  };
}

/** What differs between two form states, as [{ what, mine, theirs }]. */
function differences(mine, theirs) {
  const out = [];
  const text = (v) => (v === '' || v === undefined ? '(empty)' : v);
  for (const [key, what] of [['name', 'Name'], ['type', 'Type'], ['description', 'Description']]) {
    if (mine[key] !== theirs[key]) out.push({ what, mine: text(mine[key]), theirs: text(theirs[key]) });
  }
  const planText = (p) => (p ? `${p.name || p.key}: cost ${p.cost}; ${p.rows.filter((r) => r.name).map((r) => `${r.name} ${r.value}`).join(', ')}` : '(no such plan)');
  const keys = [...new Set([...mine.plans.map((p) => p.key), ...theirs.plans.map((p) => p.key)])];
  for (const key of keys) {
    const a = mine.plans.find((p) => p.key === key);
    const b = theirs.plans.find((p) => p.key === key);
    if (planText(a) !== planText(b)) out.push({ what: `Plan ${key}`, mine: planText(a), theirs: planText(b) });
  }
  return out;
}

export function mountEditor(main, ctx, [editId]) {
  const session = currentSession();
  const creating = editId === undefined;
  const draftKey = creating ? 'new' : editId;
  if (!session) {
    ctx.flash = { kind: 'error', text: loadDraft(draftKey) ? 'Sign in to go on editing: your unsaved changes are kept.' : 'Sign in to create or edit offers.' };
    ctx.returnTo = location.hash;
    // Defer: we are inside the router's mount.
    queueMicrotask(() => ctx.navigate('#/provider'));
    return null;
  }
  const { store } = ctx;
  let disposed = false;
  let loadedVersion = null;
  let deletedMeanwhile = false;
  let saved = null; // the form state as last loaded or saved (null until loaded)
  let ready = creating;

  const typeList = h('datalist', { id: 'offer-types' }, OFFER_TYPES.map((t) => h('option', { value: t })));
  const fields = {
    id: field({ label: 'Offer ID', hint: 'Part of the offer’s address (/offer/<ID>); cannot change later. E.g. storage-small', attrs: { name: 'id', autocomplete: 'off', spellcheck: 'false', required: true } }),
    name: field({ label: 'Name', hint: 'What consumers see, e.g. Storage-optimized offer', attrs: { name: 'name', autocomplete: 'off', required: true } }),
    type: field({ label: 'Type', hint: 'Consumers filter by it, e.g. compute, storage, gpu', attrs: { name: 'type', list: 'offer-types', autocomplete: 'off', spellcheck: 'false', required: true } }),
    description: field({ label: 'Description', tag: 'textarea', hint: 'Optional: what the offer is good for.', attrs: { name: 'description', rows: '3' } }),
  };
  const summary = errorSummary();
  const planEditor = createPlanEditor({ announce: ctx.announce });
  const changeNotice = h('div', { class: 'notice-slot', role: 'status' });
  const draftNotice = h('div', { class: 'notice-slot' });
  const submit = h('button', { type: 'submit', class: 'button', text: creating ? 'Publish offer' : 'Save changes' });
  const form = h('form', { class: 'form offer-form', novalidate: true, 'aria-labelledby': 'editor-heading' },
    summary.element,
    changeNotice,
    draftNotice,
    h('fieldset', { class: 'offer-fields' },
      h('legend', {}, h('span', { class: 'legend-title', text: 'Offer' })),
      typeList,
      Object.values(fields).map((f) => f.wrapper)),
    planEditor.element,
    h('p', { class: 'form-actions' },
      submit,
      h('a', { class: 'button button--secondary', href: '#/provider', text: 'Cancel' })));
  const heading = h('h1', { id: 'editor-heading', text: creating ? 'New offer' : 'Edit offer' });

  // Import and export: the form as a JSON or YAML file, and a file read into the form.
  const fileStatus = h('p', { class: 'file-status', role: 'status' });
  const download = (kind) => {
    const doc = offerDocument(current());
    const text = kind === 'json' ? `${JSON.stringify(doc, null, 2)}\n` : `${toYaml(doc)}\n`;
    const link = h('a', {
      href: URL.createObjectURL(new Blob([text], { type: kind === 'json' ? 'application/json' : 'application/yaml' })),
      download: `${doc.id || 'offer'}.${kind === 'json' ? 'json' : 'yaml'}`,
    });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
    fileStatus.textContent = `Exported ${link.download}.`;
  };
  const importInput = h('input', { type: 'file', accept: '.json,.yaml,.yml,application/json,application/yaml', hidden: true, 'aria-label': 'Offer file to import', 'data-role': 'import-file' });
  importInput.addEventListener('change', async () => {
    const file = importInput.files?.[0];
    importInput.value = '';
    if (!file) return;
    summary.clear();
    try {
      if (file.size > 64 * 1024) throw new OfferFileError('The file is larger than an offer can be (64 KiB).');
      const state = readOfferFile(await file.text());
      if (!creating) state.id = editId; // an edit keeps its ID
      setForm(state);
      keepDraft();
      fileStatus.textContent = `Imported ${file.name}: check the form, then ${creating ? 'publish' : 'save'}.`;
      fields.name.control.focus();
    } catch (err) {
      summary.show([{ message: `Could not import ${file.name}: ${err.message}`, control: null }]);
    }
  });
  const fileTools = h('div', { class: 'file-tools', role: 'group', 'aria-label': 'Import and export' },
    h('button', { type: 'button', class: 'button button--secondary button--small', text: 'Export JSON', onclick: () => download('json') }),
    h('button', { type: 'button', class: 'button button--secondary button--small', text: 'Export YAML', onclick: () => download('yaml') }),
    h('button', { type: 'button', class: 'button button--secondary button--small', 'data-role': 'import', text: 'Import JSON or YAML…', onclick: () => importInput.click() }),
    importInput,
    fileStatus);
  replaceChildren(main,
    h('p', { class: 'back-link' }, h('a', { href: '#/provider' }, h('span', { 'aria-hidden': 'true', text: '← ' }), 'Your offers')),
    h('div', { class: 'view-header' }, heading,
      h('p', { class: 'lede', text: creating
        ? 'Describe what you offer and its plans. Consumers see it as soon as you publish.'
        : 'Changes reach consumers as soon as you save.' })),
    fileTools,
    form);

  /** The form as typed. */
  function current() {
    return {
      id: fields.id.control.value.trim(),
      name: fields.name.control.value.trim(),
      type: fields.type.control.value.trim(),
      description: fields.description.control.value.trim(),
      plans: planEditor.read(),
    };
  }

  // Each stored plan's last update as the catalog recorded it (plan key → stamp), shown in its fieldset.
  let stamps = new Map();
  function setForm(state) {
    fields.id.control.value = state.id;
    fields.name.control.value = state.name;
    fields.type.control.value = state.type;
    fields.description.control.value = state.description;
    planEditor.reset(state.plans.map((p) => ({ key: p.key, name: p.name, cost: p.cost, resources: p.rows.map((r) => [r.name, r.value]), stamp: stamps.get(p.key) })));
  }

  const isDirty = () => ready && saved !== null && JSON.stringify(current()) !== JSON.stringify(saved);

  function keepDraft() {
    if (!ready) return;
    if (isDirty()) saveDraft(draftKey, current(), loadedVersion);
    else discardDraft(draftKey);
  }
  form.addEventListener('input', keepDraft);
  form.addEventListener('click', () => queueMicrotask(keepDraft)); // added and removed plans and rows

  function offerDraft() {
    const draft = loadDraft(draftKey);
    if (!draft) return;
    setForm(draft.form);
    if (draft.baseVersion !== null && draft.baseVersion !== undefined) loadedVersion = draft.baseVersion;
    replaceChildren(draftNotice, h('div', { class: 'notice notice--warning', 'data-state': 'draft-restored' },
      h('p', { text: `Restored your unsaved changes from ${formatTime(draft.savedAt)}.` }),
      h('p', {}, h('button', {
        type: 'button', class: 'button button--secondary button--small', text: 'Discard them',
        onclick: () => {
          discardDraft(draftKey);
          setForm(saved);
          loadedVersion = saved.version ?? loadedVersion;
          draftNotice.replaceChildren();
          fields.name.control.focus();
        },
      }))));
  }

  let serviceOffer = false; // set by fill(): see the submit handler
  function fill(offer) {
    serviceOffer = offer.kind === 'service';
    loadedVersion = offer.version;
    stamps = new Map(offer.plans.map((p) => [p.key, p.stamp]));
    saved = formOf(offer);
    setForm(saved);
    fields.id.control.readOnly = true;
    heading.textContent = `Edit “${offer.name}”`;
    document.title = `Edit ${offer.name} · Liqo resource catalog`;
  }

  if (creating) {
    document.title = 'New offer · Liqo resource catalog';
    planEditor.addPlan({ key: 'basic', resources: [['cpu', ''], ['memory', ''], ['storage', '']] });
    saved = current();
    offerDraft();
  } else {
    fields.id.control.value = editId;
    fields.id.control.readOnly = true;
    form.setAttribute('aria-busy', 'true');
    const start = async () => {
      let offer = store.get(editId);
      if (!offer) {
        try {
          offer = normalizeOffer(await getOffer(editId));
        } catch (err) {
          if (disposed) return;
          form.removeAttribute('aria-busy');
          replaceChildren(form, h('p', { class: 'notice notice--error', role: 'alert', text: err.status === 404 ? `There is no offer with the ID ${editId}.` : `Could not load the offer: ${err.message}` }),
            h('p', {}, h('a', { href: '#/provider', text: 'Back to your offers' })));
          return;
        }
      }
      if (disposed || !offer) return;
      form.removeAttribute('aria-busy');
      if (offer.clusterID && offer.clusterID !== session.clusterID) {
        replaceChildren(form, h('p', { class: 'notice notice--error', role: 'alert', text: `The offer ${editId} belongs to another provider (${offer.clusterName || offer.clusterID}); you can only edit your own offers.` }),
          h('p', {}, h('a', { href: '#/provider', text: 'Back to your offers' })));
        return;
      }
      fill(offer);
      ready = true;
      offerDraft();
    };
    start();
  }

  // Someone (another tab, the ResourceReader chain) may change the offer while it is being edited.
  const onChange = (event) => {
    if (creating || loadedVersion === null) return;
    const { updated, removed } = event.detail;
    if (removed.some((o) => o.id === editId)) {
      deletedMeanwhile = true;
      replaceChildren(changeNotice, h('p', { class: 'notice notice--warning', text: 'This offer was deleted while you were editing it. Saving publishes it again.' }));
    } else {
      const latest = updated.find((o) => o.id === editId);
      if (latest && latest.version !== loadedVersion) {
        replaceChildren(changeNotice, h('p', { class: 'notice notice--warning', text: `This offer changed while you were editing it (now version ${latest.version}). When you save, you can compare and keep yours or take that version.` }));
      }
    }
  };
  store.addEventListener('change', onChange);

  /** A 409: show what differs between the form and the stored offer; keep mine or take theirs. */
  async function showConflict(err) {
    let theirs = null;
    try {
      theirs = normalizeOffer(await getOffer(editId));
    } catch {
      theirs = null;
    }
    if (disposed) return;
    if (!theirs) {
      summary.show([{ message: `Someone changed or deleted this offer after you opened it, so it was not saved. (${err.message})`, control: null }]);
      return;
    }
    const mine = current();
    const other = formOf(theirs);
    const rows = differences(mine, other);
    summary.show([{ message: `Someone changed this offer after you opened it (now version ${theirs.version}), so it was not saved. Compare, then keep your version or take theirs.`, control: null }]);
    summary.element.append(
      h('table', { class: 'diff-table' },
        h('caption', { text: 'What differs' }),
        h('thead', {}, h('tr', {}, h('th', { scope: 'col', text: 'Field' }), h('th', { scope: 'col', text: 'Yours' }), h('th', { scope: 'col', text: 'Theirs' }))),
        h('tbody', {}, rows.map((row) => h('tr', {}, h('th', { scope: 'row', text: row.what }), h('td', { text: row.mine }), h('td', { text: row.theirs }))))),
      h('p', { class: 'form-actions' },
        h('button', {
          type: 'button', class: 'button', text: 'Keep mine',
          onclick: () => {
            loadedVersion = theirs.version;
            deletedMeanwhile = false;
            form.requestSubmit();
          },
        }),
        h('button', {
          type: 'button', class: 'button button--secondary', text: 'Take theirs',
          onclick: () => {
            summary.clear();
            changeNotice.replaceChildren();
            fill(theirs);
            discardDraft(draftKey);
            ctx.announce('Loaded the other version; your changes were discarded.');
            fields.name.control.focus();
          },
        })));
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    summary.clear();
    for (const f of Object.values(fields)) f.setError('');
    planEditor.clearErrors();

    // This form edits capacity plans only: saving a service offer from it
    // would publish it without its hosting policies and parameter schemas.
    if (serviceOffer) {
      summary.show([{ message: 'This is a service offer: its plans carry hosting policies and parameter schemas that this form does not edit, so saving here would lose them. Publish changes from a file (brokerctl offers publish -f) or with the API.', control: null }]);
      return;
    }
    const state = current();
    const problems = offerProblems(state).map(({ path, message }) => ({
      message,
      field: fields[path] ?? planEditor.fieldAt(path)?.field ?? null,
    }));
    if (creating && state.id && store.get(state.id)?.clusterID === session.clusterID) {
      problems.unshift({ field: fields.id, message: `You already have an offer with the ID “${state.id}”. Choose another ID, or edit that offer instead.` });
    }
    if (problems.length) {
      for (const p of problems) p.field?.setError(p.message);
      summary.show(problems.map((p) => ({ message: p.message, control: p.field?.control ?? null })));
      return;
    }
    const id = state.id;
    const body = { name: state.name, type: state.type, description: state.description, plans: planEditor.body() };
    // A conditional write: if someone changed the offer since it was loaded,
    // the catalog answers 409 instead of silently overwriting their change.
    if (!creating && loadedVersion !== null && !deletedMeanwhile) body.version = loadedVersion;
    const paths = new Map([
      ['id', { field: fields.id, kind: 'id' }], ['name', { field: fields.name, kind: null }],
      ['type', { field: fields.type, kind: null }], ['description', { field: fields.description, kind: null }],
      ...planEditor.serverPaths(),
    ]);

    submit.disabled = true;
    const label = submit.textContent;
    submit.textContent = creating ? 'Publishing…' : 'Saving…';
    try {
      const { created, offer } = await saveOffer(id, body, currentSession()?.token ?? session.token);
      let stored = offer;
      if (!stored) {
        try {
          stored = await getOffer(id);
        } catch {
          stored = null; // the feed will bring it
        }
      }
      if (stored) {
        noteOwnWrite(id, stored.version);
        store.upsert(stored, 'rest');
      }
      discardDraft(draftKey);
      saved = current();
      ctx.flash = { kind: 'ok', text: created || creating ? `Published “${body.name || id}”. Consumers see it now.` : `Saved “${body.name || id}”. Consumers see the changes now.` };
      ctx.navigate('#/provider');
    } catch (err) {
      if (disposed) return;
      submit.disabled = false;
      submit.textContent = label;
      if (err.status === 401) {
        saveDraft(draftKey, current(), loadedVersion);
        ctx.returnTo = location.hash;
        saved = current(); // kept as a draft: leaving now loses nothing
        handleExpiredSession(ctx, 'Your session has expired. Sign in again: your unsaved changes are kept and come back after you sign in.');
        return;
      }
      if (err.status === 409) {
        await showConflict(err);
        return;
      }
      const path = err.status === 403 ? 'id' : matchFieldPath(err.message, paths, err.field);
      const target = path ? paths.get(path) : null;
      let message;
      if (err.status === 403) message = `The offer ID “${id}” belongs to another provider; choose a different ID. (${err.message})`;
      else message = plainServerMessage(err.message, target?.kind ?? null, target?.field.control.value?.trim());
      if (target) target.field.setError(message);
      summary.show([{ message, control: target?.field.control ?? null }]);
    }
  });

  // Ask before leaving with unsaved changes (another view of this page, or the page itself).
  const onBeforeUnload = (event) => {
    if (!isDirty()) return;
    event.preventDefault();
    event.returnValue = '';
  };
  window.addEventListener('beforeunload', onBeforeUnload);
  ctx.leaveGuard = () => {
    if (!isDirty()) return true;
    // eslint-disable-next-line no-alert
    const leave = window.confirm('You have unsaved changes to this offer. Leave and discard them?');
    if (leave) discardDraft(draftKey);
    return leave;
  };

  return () => {
    disposed = true;
    ctx.leaveGuard = null;
    window.removeEventListener('beforeunload', onBeforeUnload);
    store.removeEventListener('change', onChange);
  };
}
