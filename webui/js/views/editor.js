// Create or edit one of the provider's offers. Nothing is validated here
// that the server validates: the form sends what was typed, and the server's
// message is shown beside the field it names (and in the error summary).
// Only what JSON cannot carry (empty or duplicate keys) is checked locally.

import { getOffer, saveOffer } from '../api.js';
import { h, replaceChildren } from '../dom.js';
import { field, matchFieldPath } from '../fields.js';
import { normalizeOffer } from '../model.js';
import { currentSession } from '../session.js';
import { errorSummary } from './error-summary.js';
import { createPlanEditor } from './plan-editor.js';
import { handleExpiredSession } from './provider.js';

const OFFER_TYPES = ['compute', 'storage', 'memory', 'gpu', 'general-purpose'];

export function mountEditor(main, ctx, [editId]) {
  const session = currentSession();
  if (!session) {
    ctx.flash = { kind: 'error', text: 'Sign in to create or edit offers.' };
    // Defer: we are inside the router's mount.
    queueMicrotask(() => ctx.navigate('#/provider'));
    return null;
  }
  const { store } = ctx;
  const creating = editId === undefined;
  let disposed = false;
  let loadedVersion = null;
  let deletedMeanwhile = false;

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
  const submit = h('button', { type: 'submit', class: 'button', text: creating ? 'Publish offer' : 'Save changes' });
  const form = h('form', { class: 'form offer-form', novalidate: true, 'aria-labelledby': 'editor-heading' },
    summary.element,
    changeNotice,
    h('fieldset', { class: 'offer-fields' },
      h('legend', {}, h('span', { class: 'legend-title', text: 'Offer' })),
      typeList,
      Object.values(fields).map((f) => f.wrapper)),
    planEditor.element,
    h('p', { class: 'form-actions' },
      submit,
      h('a', { class: 'button button--secondary', href: '#/provider', text: 'Cancel' })));
  const heading = h('h1', { id: 'editor-heading', text: creating ? 'New offer' : 'Edit offer' });
  replaceChildren(main,
    h('p', { class: 'back-link' }, h('a', { href: '#/provider' }, h('span', { 'aria-hidden': 'true', text: '← ' }), 'Your offers')),
    h('div', { class: 'view-header' }, heading,
      h('p', { class: 'lede', text: creating
        ? 'Describe what you offer and its plans. Consumers see it as soon as you publish.'
        : 'Changes reach consumers as soon as you save.' })),
    form);

  function fill(offer) {
    loadedVersion = offer.version;
    fields.id.control.value = offer.id;
    fields.name.control.value = offer.raw.name ?? '';
    fields.type.control.value = offer.type;
    fields.description.control.value = offer.description;
    for (const plan of offer.plans) {
      planEditor.addPlan({ key: plan.key, name: plan.name, cost: plan.cost, resources: plan.resources.map((r) => [r.name, r.value]) });
    }
    heading.textContent = `Edit “${offer.name}”`;
    document.title = `Edit ${offer.name} · Liqo resource catalog`;
  }

  if (creating) {
    document.title = 'New offer · Liqo resource catalog';
    planEditor.addPlan({ key: 'basic', resources: [['cpu', ''], ['memory', ''], ['storage', '']] });
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
        replaceChildren(changeNotice, h('p', { class: 'notice notice--warning', text: `This offer changed while you were editing it (now version ${latest.version}). Saving replaces that version with what is in this form.` }));
      }
    }
  };
  store.addEventListener('change', onChange);

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    summary.clear();
    for (const f of Object.values(fields)) f.setError('');
    planEditor.clearErrors();

    const id = fields.id.control.value.trim();
    const { plans, paths: planPaths, problems } = planEditor.collect();
    if (!id) problems.unshift({ field: fields.id, message: 'Enter an ID for the offer.' });
    if (creating && id && store.get(id)?.clusterID === session.clusterID) {
      problems.unshift({ field: fields.id, message: `You already have an offer with the ID “${id}”. Choose another ID, or edit that offer instead.` });
    }
    if (problems.length) {
      for (const p of problems) p.field.setError(p.message);
      summary.show(problems.map((p) => ({ message: p.message, control: p.field.control })));
      return;
    }
    const body = {
      name: fields.name.control.value.trim(),
      type: fields.type.control.value.trim(),
      description: fields.description.control.value.trim(),
      plans,
    };
    // A conditional write: if someone changed the offer since it was loaded,
    // the catalog answers 409 instead of silently overwriting their change.
    if (!creating && loadedVersion !== null && !deletedMeanwhile) body.version = loadedVersion;
    const paths = new Map([
      ['id', fields.id], ['name', fields.name], ['type', fields.type], ['description', fields.description],
      ...planPaths,
    ]);

    submit.disabled = true;
    const label = submit.textContent;
    submit.textContent = creating ? 'Publishing…' : 'Saving…';
    try {
      const { created, offer } = await saveOffer(id, body, session.token);
      let saved = offer;
      if (!saved) {
        try {
          saved = await getOffer(id);
        } catch {
          saved = null; // the feed will bring it
        }
      }
      if (saved) store.upsert(saved, 'rest');
      ctx.flash = { kind: 'ok', text: created || creating ? `Published “${body.name || id}”. Consumers see it now.` : `Saved “${body.name || id}”. Consumers see the changes now.` };
      ctx.navigate('#/provider');
    } catch (err) {
      if (disposed) return;
      submit.disabled = false;
      submit.textContent = label;
      if (err.status === 401) {
        handleExpiredSession(ctx);
        return;
      }
      let path = matchFieldPath(err.message, paths, err.field);
      let message = err.message;
      if (err.status === 403) {
        path = 'id';
        message = `The offer ID “${id}” belongs to another provider; choose a different ID. (${err.message})`;
      }
      if (err.status === 409) {
        summary.show([{ message: `Someone changed this offer after you opened it, so it was not saved. Reload it to see the current version, then make your changes again. (${err.message})`, control: null }]);
        summary.element.append(h('p', {}, h('button', {
          type: 'button', class: 'button button--secondary', text: 'Reload the current version',
          onclick: () => ctx.navigate(location.hash),
        })));
        return;
      }
      const target = path ? paths.get(path) : null;
      if (target) target.setError(message);
      summary.show([{ message, control: target?.control ?? null }]);
    }
  });

  return () => {
    disposed = true;
    store.removeEventListener('change', onChange);
  };
}
