// A service offer's page (`#/service/<offer>`): the consumer picks a plan
// (its hosting policy and cost shown), fills the plan's parameters — a form
// made from its `schemas.service_instance.create.parameters`
// (service-form.js), checked in the browser with every problem beside its
// field before anything is sent — and gives the kubeconfig of the Liqo
// peering user their cluster minted for this provider (pasted, or read from
// a file). Creating provisions the plan over the catalog's Open Service
// Broker API as a platform would (PUT with `accepts_incomplete=true`, the
// kubeconfig in `context.peering`); a 400 shows beside the field its
// description names. The instance page follows it from there; the
// consumer's instances of this service are listed from the catalog.

import { h, replaceChildren, uid } from '../dom.js';
import { field } from '../fields.js';
import { formatCost } from '../pricing.js';
import { formFields, kubeconfigProblem, readParameters, serverFieldError } from '../service-form.js';
import { newId, osbIds, provision } from '../service-api.js';
import { instancesOf } from '../service-instances.js';
import { errorSummary } from './error-summary.js';
import { consumerSessionExpired, requireConsumer } from './sign-in.js';

/** Where a hosting policy runs the service, in words. */
export const HOSTING_TEXT = {
  Local: 'Runs at the provider; your cluster reaches it through Liqo',
  Remote: 'Runs in your cluster: Liqo offloads the service’s namespace to it',
  LocalAndRemote: 'Split between the provider and your cluster',
};

/** The field name the catalog's 400 uses for the kubeconfig. */
const KUBECONFIG_PATH = 'context.peering.kubeconfig';

/** A control for one schema field; returns its field API with `read()` giving what service-form.js reads. */
export function parameterControl(spec) {
  const base = { name: `parameters.${spec.name}`, 'data-parameter': spec.name, ...(spec.required ? { 'aria-required': 'true' } : {}) };
  if (spec.kind === 'boolean') {
    const api = field({ label: spec.label, hint: spec.hint, attrs: { ...base, type: 'checkbox', checked: spec.initial === true }, class: 'field--checkbox' });
    return { ...api, read: () => api.control.checked };
  }
  if (spec.kind === 'enum') {
    const none = spec.required ? 'Choose…' : '(not set)';
    const api = field({
      label: spec.label, hint: spec.hint, tag: 'select', attrs: base,
      children: [h('option', { value: '', text: none }), ...spec.options.map((v, i) => h('option', { value: String(i), text: String(v) }))],
    });
    api.control.value = String(spec.initial);
    return { ...api, read: () => api.control.value };
  }
  if (spec.kind === 'json') {
    const api = field({ label: spec.label, hint: spec.hint, tag: 'textarea', attrs: { ...base, rows: 4, spellcheck: 'false', class: 'code-input' } });
    api.control.value = spec.initial;
    return { ...api, read: () => api.control.value };
  }
  const numeric = spec.kind === 'integer' || spec.kind === 'number';
  const api = field({
    label: spec.label, hint: spec.hint,
    attrs: { ...base, autocomplete: 'off', spellcheck: 'false', ...(numeric ? { inputmode: spec.kind === 'integer' ? 'numeric' : 'decimal' } : {}) },
  });
  api.control.value = spec.initial;
  return { ...api, read: () => api.control.value };
}

/**
 * What the consumer's cluster needs before provisioning, and what happens
 * after: said before the form, so nobody learns it from an instance that
 * never becomes ready.
 */
function prerequisites(offer) {
  const provider = offer.clusterID || '<provider cluster ID>';
  const ns = '<namespace>';
  return h('section', { class: 'service-prerequisites', 'data-role': 'prerequisites', 'aria-labelledby': 'service-prerequisites-heading' },
    h('h2', { id: 'service-prerequisites-heading', text: 'Before you start' }),
    h('ul', {},
      h('li', {}, 'Your cluster runs Liqo v1 and the broker’s purchase-controller with ', h('code', { text: '--copy-bindings' }),
        ': it copies the credentials this provider sends into the namespace you choose.'),
      h('li', { 'data-field': 'accept-bindings' }, 'That namespace accepts them from this provider: ',
        h('code', { text: `kubectl label namespace ${ns} broker.liqo-broker.io/accept-bindings=true` }), ' and ',
        h('code', { text: `kubectl annotate namespace ${ns} broker.liqo-broker.io/accept-bindings-from=${provider}` }), '.'),
      h('li', {}, 'A peering user of your cluster for this provider (its kubeconfig goes in the form below).')),
    h('p', { class: 'hint', 'data-field': 'what-happens' },
      'What happens next: the provider’s service-controller peers with your cluster as that user, creates the service and reports each step; the instance page follows them. Until the provider reports, the instance stays in progress: this page never reports a success on the provider’s behalf.'));
}

export function mountServiceOrder(main, ctx, [offerID]) {
  const session = requireConsumer(ctx, 'Sign in to set up a service.');
  if (!session) return null;
  const { store } = ctx;
  const body = h('div', { class: 'service-order' });
  replaceChildren(main,
    h('p', { class: 'back-link' }, h('a', { href: `#/offer/${encodeURIComponent(offerID)}` }, h('span', { 'aria-hidden': 'true', text: '← ' }), 'The offer')),
    body);
  let shown = false;

  function render() {
    const offer = store.get(offerID);
    if (!offer) {
      document.title = 'Service · Liqo resource catalog';
      replaceChildren(body, h('h1', { text: 'Service' }), store.loaded
        ? h('p', { class: 'notice', 'data-state': 'not-found' }, 'There is no offer with the ID ', h('code', { text: offerID }), ' in this catalog.')
        : h('p', { class: 'notice', 'aria-busy': 'true', text: 'Loading the offer…' }));
      return;
    }
    if (shown) return; // A live update must not wipe what the consumer is typing.
    shown = true;
    document.title = `Set up ${offer.name} · Liqo resource catalog`;
    if (offer.kind !== 'service') {
      replaceChildren(body, h('h1', { text: offer.name }),
        h('p', { class: 'notice' }, 'This offer sells capacity, not a service: ', h('a', { href: `#/offer/${encodeURIComponent(offerID)}`, text: 'reserve one of its plans' }), '.'));
      return;
    }
    renderForm(offer);
  }

  function renderForm(offer) {
    const summary = errorSummary();
    const plans = offer.plans;
    const planName = `plan-${uid('p')}`;
    const planChoices = plans.map((plan, index) => {
      const id = uid('plan');
      const hintId = `${id}-hint`;
      return h('div', { class: 'choice', 'data-plan': plan.key },
        h('input', { type: 'radio', id, name: planName, value: plan.key, checked: index === 0, 'aria-describedby': hintId, onchange: () => showParameters(plan.key) }),
        h('label', { for: id }, h('strong', { text: plan.name || plan.key }), ` · ${formatCost(plan.cost)}`),
        h('p', { id: hintId, class: 'hint', 'data-field': 'hosting' },
          h('span', { class: 'badge badge--type', text: plan.hosting || 'hosting not stated' }), ' ',
          HOSTING_TEXT[plan.hosting] ?? ''));
    });
    const planSet = h('fieldset', { class: 'service-section' }, h('legend', {}, h('span', { class: 'legend-title', text: 'Plan' })), planChoices);
    const parametersSet = h('fieldset', { class: 'service-section', 'data-role': 'parameters' });
    const kubeconfigField = field({
      label: 'Peering-user kubeconfig',
      hint: 'Run `liqoctl generate peering-user --consumer-cluster-id ' + (offer.clusterID || '<provider cluster ID>') + '` on your cluster and paste what it prints (or load the file below). The provider peers with your cluster as this user; the catalog keeps it secret.',
      tag: 'textarea',
      attrs: { name: 'kubeconfig', rows: 6, spellcheck: 'false', autocomplete: 'off', class: 'code-input', 'aria-required': 'true', 'data-field': 'kubeconfig' },
    });
    const fileField = field({ label: 'Or load the kubeconfig from a file', attrs: { type: 'file', name: 'kubeconfig-file', accept: '.kubeconfig,.yaml,.yml,.conf,text/yaml,application/yaml', 'data-field': 'kubeconfig-file' } });
    fileField.control.addEventListener('change', async () => {
      const file = fileField.control.files?.[0];
      if (!file) return;
      kubeconfigField.control.value = await file.text();
      kubeconfigField.setError(kubeconfigProblem(kubeconfigField.control.value) ?? '');
    });
    const clusterSet = h('fieldset', { class: 'service-section' },
      h('legend', {}, h('span', { class: 'legend-title', text: 'Your cluster' })),
      kubeconfigField.wrapper, fileField.wrapper);
    const create = h('button', { type: 'submit', class: 'button', text: 'Create the service' });
    const form = h('form', { class: 'form service-form', novalidate: true, 'aria-labelledby': 'service-order-heading', onsubmit: submit },
      summary.element, planSet, parametersSet, clusterSet, h('p', { class: 'form-actions' }, create));

    let current = { form: { whole: false, fields: [] }, controls: new Map() };
    function showParameters(planKey) {
      const schema = offer.raw.plans?.[planKey]?.schemas?.service_instance?.create?.parameters;
      const built = formFields(schema);
      const controls = new Map(built.fields.map((spec) => [spec.name, parameterControl(spec)]));
      replaceChildren(parametersSet,
        h('legend', {}, h('span', { class: 'legend-title', text: 'Parameters' })),
        built.fields.length ? [...controls.values()].map((c) => c.wrapper) : h('p', { class: 'hint', text: 'This plan takes no parameters.' }));
      current = { form: built, controls };
      summary.clear();
    }
    showParameters(plans[0]?.key);

    let checkedOnce = false;
    /** Check everything; show each problem beside its field (and in the summary when `summarise`). */
    function check(summarise) {
      const values = Object.fromEntries([...current.controls].map(([name, c]) => [name, c.read()]));
      const read = readParameters(current.form, values);
      const problems = [];
      for (const [name, c] of current.controls) {
        const message = read.errors?.[name] ?? '';
        c.setError(message);
        if (message) problems.push({ message: `${c.control.labels?.[0]?.textContent ?? name}: ${message}`, control: c.control });
      }
      const kubeconfigError = kubeconfigProblem(kubeconfigField.control.value);
      kubeconfigField.setError(kubeconfigError ?? '');
      if (kubeconfigError) problems.push({ message: `Peering-user kubeconfig: ${kubeconfigError}`, control: kubeconfigField.control });
      if (summarise) {
        if (problems.length) summary.show(problems);
        else summary.clear();
      }
      return problems.length ? null : read.parameters;
    }
    // After a first attempt, each change re-checks, so a fixed field clears its error at once.
    form.addEventListener('change', () => { if (checkedOnce) check(false); });

    async function submit(event) {
      event.preventDefault();
      checkedOnce = true;
      const parameters = check(true);
      if (!parameters) return;
      const planKey = form.querySelector(`input[name="${planName}"]:checked`)?.value ?? plans[0]?.key;
      const plan = plans.find((p) => p.key === planKey);
      create.disabled = true;
      try {
        const ids = await osbIds(session.token, offer.id, planKey);
        if (!ids) {
          summary.show([{ message: `Plan ${plan?.name || planKey} is not on sale right now (its provider may be disabled). Try again later.`, control: null }]);
          return;
        }
        // The catalog records the instance with the request: its page, and
        // "my purchases" from any browser, find it there.
        const id = newId();
        await provision(session.token, id, { ...ids, parameters, kubeconfig: kubeconfigField.control.value, space: session.subject });
        ctx.flash = { kind: 'ok', text: 'Requested: the provider now peers with your cluster and creates the service.' };
        ctx.navigate(`#/service-instance/${encodeURIComponent(id)}`);
      } catch (err) {
        if (err.status === 401) {
          consumerSessionExpired(ctx);
          return;
        }
        const names = [...current.controls.keys(), KUBECONFIG_PATH];
        const named = err.status === 400 ? serverFieldError(err.message, names) : { field: null, words: err.message };
        const target = named.field === KUBECONFIG_PATH ? kubeconfigField : current.controls.get(named.field);
        if (target) {
          target.setError(named.words, 'The catalog refused this: ');
          summary.show([{ message: `${target.control.labels?.[0]?.textContent ?? named.field}: ${named.words}`, control: target.control }]);
        } else {
          summary.show([{ message: `The catalog refused the request: ${err.message}`, control: null }]);
        }
      } finally {
        create.disabled = false;
      }
    }

    const mineSlot = h('div', { 'data-role': 'service-mine' });
    instancesOf(session.token, store).then((all) => {
      const mine = all.filter((r) => r.offerID === offer.id);
      if (!mine.length) return;
      replaceChildren(mineSlot, h('section', { class: 'service-mine', 'aria-labelledby': 'service-mine-heading' },
        h('h2', { id: 'service-mine-heading', text: 'Your instances of this service' }),
        h('ul', { 'data-list': 'service-instances' }, mine.map((r) => h('li', {},
          h('a', { href: `#/service-instance/${encodeURIComponent(r.id)}`, text: `${r.planName} · ${r.id}` }))))));
    }, () => {
      // The list is a courtesy here: the form works without it.
    });
    replaceChildren(body,
      h('div', { class: 'view-header' },
        h('h1', { id: 'service-order-heading', tabindex: '-1', text: `Set up ${offer.name}` }),
        h('p', { class: 'lede' }, offer.description || '', ` Provided by ${offer.clusterName || offer.clusterID}.`)),
      prerequisites(offer),
      mineSlot,
      form);
  }

  const onChange = () => render();
  store.addEventListener('change', onChange);
  render();
  return () => store.removeEventListener('change', onChange);
}
