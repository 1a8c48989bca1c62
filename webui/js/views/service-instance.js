// One service instance (`#/service-instance/<id>`), followed as a platform
// follows it over the Open Service Broker API: provisioning's steps
// (contract bought → peering with the customer's cluster → creating the
// service → ready, or failed) from polling `last_operation`
// (service-steps.js); then binding — where the credentials Secret goes in
// the customer's cluster (`parameters.namespace`, `parameters.secretName`,
// plus what the plan's binding schema asks) — followed the same way; then
// the `kubectl` commands that show the running service in the customer's
// cluster. Deprovisioning unbinds first (OSB: platforms delete bindings
// before the instance) and follows both operations until the broker
// answers 410 Gone. What the page starts from is the catalog's record of
// the instance (`GET /service-instances/{id}`, service-instances.js), so a
// reload, or another browser, goes on where it was.

import { formatTime, h, replaceChildren } from '../dom.js';
import { field } from '../fields.js';
import { dnsLabelProblem, dnsSubdomainProblem, formFields, readParameters, serverFieldError } from '../service-form.js';
import { bind, bindingLastOperation, deprovision, fetchBinding, lastOperation, newId, unbind } from '../service-api.js';
import { instanceRecord, recordOf } from '../service-instances.js';
import { bindingProgress, contractNamed, kubectlCommands, namespaceNamed, provisionProgress } from '../service-steps.js';
import { copyBlock } from './copy-block.js';
import { errorSummary } from './error-summary.js';
import { HOSTING_TEXT, parameterControl } from './service-order.js';
import { consumerSessionExpired, requireConsumer } from './sign-in.js';
import { stepItems } from './steps.js';

/** Poll no faster than this and no slower than that, whatever Retry-After says (seconds). */
const POLL_MIN_S = 0.5;
const POLL_MAX_S = 5;
/** After an error that may pass (the catalog unreachable, a 5xx), poll again after this. */
const RETRY_S = 5;

const REMOVAL_STEPS = [
  { key: 'unbind', label: 'Removing the binding' },
  { key: 'remove', label: 'Removing the service' },
  { key: 'gone', label: 'Removed' },
];

export function mountServiceInstance(main, ctx, [id]) {
  const session = requireConsumer(ctx, 'Sign in to follow your service.');
  if (!session) return null;
  document.title = 'Service instance · Liqo resource catalog';
  const flash = ctx.flash;
  ctx.flash = null;
  let dispose = null;
  let disposed = false;
  replaceChildren(main, h('h1', { text: 'Service instance' }), h('p', { class: 'notice', 'aria-busy': 'true', text: 'Loading the instance…' }));
  (async () => {
    let record;
    try {
      record = await instanceRecord(session.token, ctx.store, id);
    } catch (err) {
      if (disposed) return;
      if (err.status === 401) {
        consumerSessionExpired(ctx);
        return;
      }
      replaceChildren(main,
        h('p', { class: 'back-link' }, h('a', { href: '#/mine' }, h('span', { 'aria-hidden': 'true', text: '← ' }), 'My reservations and purchases')),
        h('h1', { text: 'Service instance' }),
        err.status === 404
          ? h('p', { class: 'notice', 'data-state': 'unknown' }, 'The catalog has no service instance ', h('code', { text: id }), ' of yours: it may have been removed. Your services are listed in ', h('a', { href: '#/mine', text: 'My purchases' }), '.')
          : h('p', { class: 'notice notice--error', role: 'alert', text: `Could not load the instance: ${err.message} Reload to try again.` }));
      return;
    }
    if (!disposed) dispose = follow(main, ctx, session, id, record, flash);
  })();
  return () => {
    disposed = true;
    dispose?.();
  };
}

/** The page of instance `id`, from the catalog's `record` of it; returns its disposer. */
function follow(main, ctx, session, id, record, flash) {
  let disposed = false;
  let timer = null;
  const notice = h('div', { class: 'notice-slot', role: 'alert' });
  const back = h('p', { class: 'back-link' }, h('a', { href: `#/service/${encodeURIComponent(record.offerID)}` }, h('span', { 'aria-hidden': 'true', text: '← ' }), 'The service'));

  // What the page learns while it follows the instance; the catalog keeps the truth.
  const update = (changes) => {
    record = { ...record, ...changes };
  };
  const ids = () => ({ serviceID: record.serviceID, planID: record.planID });
  const schedule = (fn, seconds) => {
    clearTimeout(timer);
    if (!disposed) timer = setTimeout(fn, Math.min(POLL_MAX_S, Math.max(POLL_MIN_S, seconds ?? 1)) * 1000);
  };
  // A poll answered after the consumer chose to deprovision must not take the timer over.
  const removalStarted = () => disposed || record.phase === 'deprovisioning' || record.phase === 'gone';

  /** An error while following: a 401 ends the session; anything else is said and the poll goes on. */
  const trouble = (err, retry) => {
    if (err.status === 401) {
      consumerSessionExpired(ctx);
      return;
    }
    replaceChildren(notice, h('p', { class: 'notice notice--warning', text: `Could not read the instance’s state: ${err.message} Trying again.` }));
    schedule(retry, RETRY_S);
  };

  // --- what the page shows ----------------------------------------------------
  const provisionBox = h('section', { class: 'service-steps', 'aria-labelledby': 'provision-heading' });
  const bindBox = h('section', { class: 'service-bind', 'aria-labelledby': 'bind-heading', hidden: true });
  const commandsBox = h('section', { class: 'service-commands', 'aria-labelledby': 'commands-heading', hidden: true });
  const removeBox = h('section', { class: 'service-remove', 'aria-labelledby': 'remove-heading' });
  replaceChildren(main, back,
    h('div', { class: 'view-header' }, h('h1', { text: `${record.offerName} · ${record.planName}` })),
    flash ? h('p', { class: 'notice notice--ok', role: 'status', 'data-flash': flash.kind, text: flash.text }) : null,
    notice,
    h('dl', { class: 'facts' },
      h('div', {}, h('dt', { text: 'Provider' }), h('dd', { text: record.providerName || record.providerClusterID })),
      h('div', {}, h('dt', { text: 'Hosting' }), h('dd', { 'data-field': 'hosting' }, `${record.hosting || '—'}`, HOSTING_TEXT[record.hosting] ? h('span', { class: 'muted', text: ` — ${HOSTING_TEXT[record.hosting]}` }) : null)),
      h('div', {}, h('dt', { text: 'Instance ID' }), h('dd', {}, h('code', { text: id }))),
      record.createdAt ? h('div', {}, h('dt', { text: 'Requested' }), h('dd', { text: formatTime(record.createdAt) })) : null),
    provisionBox, bindBox, commandsBox, removeBox);
  // Opened before the offers arrived: name the service once they do.
  const heading = main.querySelector('h1');
  const onStore = () => {
    const named = recordOf({ offerID: record.offerID, planID: record.planKey }, ctx.store);
    heading.textContent = `${named.offerName} · ${named.planName}`;
  };
  ctx.store.addEventListener('change', onStore);

  let lastProvisionKey = '';
  function showProvision(op) {
    const progress = provisionProgress(op, record.reached ?? -1);
    const current = progress.steps.find((s) => s.status !== 'done') ?? progress.steps[progress.steps.length - 1];
    const key = `${current.key}:${current.status}`;
    if (lastProvisionKey && key !== lastProvisionKey) ctx.announce(`${current.label}: ${current.status === 'current' ? 'in progress' : current.status}.`);
    lastProvisionKey = key;
    replaceChildren(provisionBox,
      h('h2', { id: 'provision-heading', text: 'Setting the service up, step by step' }),
      stepItems(progress.steps, progress.words, 'provision-steps'));
    return progress;
  }

  // --- provisioning ---------------------------------------------------------------
  async function followProvision() {
    if (disposed) return;
    let op;
    try {
      op = await lastOperation(session.token, id, record.phase === 'provisioning' ? record.operation : undefined);
    } catch (err) {
      if (removalStarted()) return;
      if (err.status === 410) {
        gone('The catalog no longer knows this instance.');
        return;
      }
      if (err.status === 400 && record.operation) {
        // Not the last operation any more (another tab went on): follow whatever is.
        update({ operation: null });
        schedule(followProvision, POLL_MIN_S);
        return;
      }
      trouble(err, followProvision);
      return;
    }
    if (removalStarted()) return;
    notice.replaceChildren();
    const progress = showProvision(op);
    update({
      reached: progress.reached,
      instanceNamespace: namespaceNamed(op.description) ?? record.instanceNamespace ?? null,
      contractID: contractNamed(op.description) ?? record.contractID ?? null,
    });
    if (op.state === 'in progress') {
      schedule(followProvision, op.retryAfter);
      return;
    }
    update({ phase: op.state === 'succeeded' ? 'ready' : 'failed' });
    if (op.state === 'succeeded') {
      showBinding();
      // Creating: follow it; bound: its keys (never kept) are read again.
      if (record.binding?.state === 'creating' || (record.binding?.state === 'bound' && !record.binding.keys)) followBinding();
    }
    showRemove();
  }

  // --- binding --------------------------------------------------------------------
  let bindForm = null;
  function showBinding() {
    bindBox.hidden = false;
    const binding = record.binding;
    if (!binding || binding.state === 'failed') {
      if (!bindForm) bindForm = makeBindForm();
      replaceChildren(bindBox,
        h('h2', { id: 'bind-heading', text: 'Bind your application' }),
        binding?.state === 'failed' ? h('p', { class: 'notice notice--error', 'data-state': 'bind-failed', text: `The binding failed: ${binding.words || 'the provider gave no reason'}. Try again.` }) : null,
        bindForm);
      return;
    }
    const progress = bindingProgress(binding.state === 'bound' ? { state: 'succeeded', description: binding.words } : { state: 'in progress', description: binding.words });
    replaceChildren(bindBox,
      h('h2', { id: 'bind-heading', text: 'Binding your application' }),
      h('p', {}, 'The credentials become the Secret ', h('code', { 'data-field': 'secret-name', text: binding.secretName }), ' in your namespace ', h('code', { 'data-field': 'app-namespace', text: binding.namespace }), ' (the namespace needs the label ', h('code', { text: 'broker.liqo-broker.io/accept-bindings=true' }), ').'),
      stepItems(progress.steps, progress.words, 'binding-steps'),
      binding.keys?.length ? h('p', { 'data-field': 'credential-keys' }, 'Keys in the Secret: ', binding.keys.map((k, i) => [i ? ', ' : '', h('code', { text: k })])) : null);
    showCommands();
  }

  function makeBindForm() {
    const summary = errorSummary();
    const namespaceField = field({ label: 'Application namespace', hint: 'The namespace of your cluster where your application runs; the credentials Secret is copied there.', attrs: { name: 'namespace', autocomplete: 'off', spellcheck: 'false', 'aria-required': 'true', 'data-field': 'bind-namespace' } });
    const secretField = field({ label: 'Secret name', hint: 'The name your application reads the credentials from.', attrs: { name: 'secretName', autocomplete: 'off', spellcheck: 'false', 'aria-required': 'true', 'data-field': 'bind-secret-name' } });
    const schema = ctx.store.get(record.offerID)?.raw.plans?.[record.planKey]?.schemas?.service_binding?.create?.parameters;
    const extra = formFields(schema, { skip: ['namespace', 'secretName'] });
    const controls = new Map(extra.fields.map((spec) => [spec.name, parameterControl(spec)]));
    const fields = new Map([['namespace', namespaceField], ['secretName', secretField], ...controls]);
    const submitButton = h('button', { type: 'submit', class: 'button', text: 'Bind' });
    const form = h('form', {
      class: 'form service-form', novalidate: true, 'aria-labelledby': 'bind-heading',
      onsubmit: async (event) => {
        event.preventDefault();
        const namespace = namespaceField.control.value.trim();
        const secretName = secretField.control.value.trim();
        const read = readParameters(extra, Object.fromEntries([...controls].map(([n, c]) => [n, c.read()])));
        const errors = { namespace: dnsLabelProblem(namespace), secretName: dnsSubdomainProblem(secretName), ...read.errors };
        const problems = [];
        for (const [name, f] of fields) {
          f.setError(errors[name] ?? '');
          if (errors[name]) problems.push({ message: `${f.control.labels?.[0]?.textContent ?? name}: ${errors[name]}`, control: f.control });
        }
        if (problems.length) {
          summary.show(problems);
          return;
        }
        summary.clear();
        submitButton.disabled = true;
        const bindingID = newId();
        const parameters = { ...read.parameters, namespace, secretName };
        try {
          const operation = await bind(session.token, id, bindingID, { ...ids(), parameters });
          update({ binding: { id: bindingID, operation, namespace, secretName, state: 'creating', words: '' } });
          bindForm = null;
          showBinding();
          followBinding();
        } catch (err) {
          if (err.status === 401) {
            consumerSessionExpired(ctx);
            return;
          }
          const named = err.status === 400 ? serverFieldError(err.message, [...fields.keys()]) : { field: null, words: err.message };
          const target = fields.get(named.field);
          if (target) target.setError(named.words, 'The catalog refused this: ');
          summary.show([{ message: target ? `${target.control.labels?.[0]?.textContent ?? named.field}: ${named.words}` : `The catalog refused the binding: ${err.message}`, control: target?.control ?? null }]);
        } finally {
          submitButton.disabled = false;
        }
      },
    }, summary.element, namespaceField.wrapper, secretField.wrapper, [...controls.values()].map((c) => c.wrapper),
    h('p', { class: 'form-actions' }, submitButton));
    return form;
  }

  async function followBinding() {
    if (removalStarted() || !record.binding) return;
    const binding = record.binding;
    let op;
    try {
      op = await bindingLastOperation(session.token, id, binding.id, binding.operation ?? undefined);
    } catch (err) {
      if (removalStarted()) return;
      if (err.status === 410) {
        update({ binding: null });
        showBinding();
        return;
      }
      trouble(err, followBinding);
      return;
    }
    if (removalStarted()) return;
    notice.replaceChildren();
    if (op.state === 'in progress') {
      update({ binding: { ...binding, words: op.description } });
      showBinding();
      schedule(followBinding, op.retryAfter);
      return;
    }
    if (op.state === 'failed') {
      update({ binding: { ...binding, state: 'failed', words: op.description } });
      ctx.announce('The binding failed.');
      showBinding();
      return;
    }
    let keys = [];
    try {
      keys = Object.keys((await fetchBinding(session.token, id, binding.id)).credentials ?? {}).sort();
    } catch {
      // The keys are a courtesy; the binding stands without them.
    }
    update({ binding: { ...binding, state: 'bound', words: op.description, keys } });
    ctx.announce('Bound: the credentials Secret is on its way to your namespace.');
    showBinding();
  }

  function showCommands() {
    const binding = record.binding;
    const commands = kubectlCommands({
      appNamespace: binding?.state === 'bound' ? binding.namespace : null,
      instanceNamespace: record.instanceNamespace,
      providerClusterID: record.providerClusterID,
    });
    commandsBox.hidden = binding?.state !== 'bound';
    if (commandsBox.hidden) return;
    replaceChildren(commandsBox,
      h('h2', { id: 'commands-heading', text: 'See it running in your cluster' }),
      h('p', { text: record.hosting === 'Local'
        ? 'The service runs at the provider; in your cluster you find its credentials Secret and, in the offloaded namespace, what Liqo reflects of it:'
        : 'Run this against your cluster: your application’s namespace with the credentials Secret, and the namespace Liqo offloaded the service to:' }),
      copyBlock('kubectl commands', commands.join('\n'), 'kubectl'));
  }

  // --- deprovisioning ---------------------------------------------------------------
  function showRemove(progress = null, words = '') {
    const removing = record.phase === 'deprovisioning' || record.phase === 'gone';
    const button = h('button', {
      type: 'button', class: 'button button--danger', text: 'Deprovision this service', 'data-role': 'deprovision',
      disabled: removing || record.phase === 'provisioning',
      onclick: () => {
        // eslint-disable-next-line no-alert
        if (!window.confirm('Deprovision this service? The provider removes it and everything it made, the binding’s Secret included; the contract ends.')) return;
        update({ phaseBefore: record.phase, phase: 'deprovisioning', removal: record.binding ? 'unbind' : 'remove', removalOperation: null });
        startRemoval();
      },
    });
    replaceChildren(removeBox,
      h('h2', { id: 'remove-heading', text: 'Deprovision' }),
      progress ? stepItems(progress, words, 'removal-steps') : null,
      record.phase === 'gone' ? null : h('p', { class: 'form-actions' }, button));
  }

  function removalSteps(at, status) {
    const index = REMOVAL_STEPS.findIndex((s) => s.key === at);
    return REMOVAL_STEPS.map((step, i) => ({ ...step, status: i < index ? 'done' : i === index ? status : 'todo' }));
  }

  async function startRemoval() {
    if (disposed) return;
    try {
      if (record.removal === 'unbind' && !record.removalOperation) {
        const operation = await unbind(session.token, id, record.binding.id, ids()).catch((err) => {
          if (err.status === 410) return 'gone';
          throw err;
        });
        if (operation === 'gone') update({ binding: null, removal: 'remove' });
        else update({ removalOperation: operation ?? 'done' });
      }
      if (record.removal === 'remove' && !record.removalOperation) {
        const operation = await deprovision(session.token, id, ids());
        update({ removalOperation: operation ?? 'done' });
      }
    } catch (err) {
      if (err.status === 401) {
        consumerSessionExpired(ctx);
        return;
      }
      update({ phase: record.phaseBefore ?? 'ready', removal: null, removalOperation: null });
      replaceChildren(notice, h('p', { class: 'notice notice--error', text: `Could not deprovision: ${err.message}` }));
      showRemove();
      return;
    }
    followRemoval();
  }

  async function followRemoval() {
    if (disposed) return;
    const unbinding = record.removal === 'unbind';
    let op;
    try {
      op = record.removalOperation === 'done' ? { state: 'succeeded' }
        : unbinding ? await bindingLastOperation(session.token, id, record.binding.id, record.removalOperation)
          : await lastOperation(session.token, id, record.removalOperation);
    } catch (err) {
      if (disposed) return;
      if (err.status === 410) op = { state: 'succeeded', description: '' };
      else {
        trouble(err, followRemoval);
        return;
      }
    }
    if (disposed) return;
    notice.replaceChildren();
    if (op.state === 'in progress') {
      showRemove(removalSteps(record.removal, 'current'), op.description);
      schedule(followRemoval, op.retryAfter);
      return;
    }
    if (op.state === 'failed') {
      // The broker keeps the instance (or binding): the consumer may try again.
      update({ phase: record.phaseBefore ?? 'ready', removal: null, removalOperation: null });
      showRemove(removalSteps(unbinding ? 'unbind' : 'remove', 'failed'), op.description);
      return;
    }
    if (unbinding) {
      update({ binding: null, removal: 'remove', removalOperation: null });
      showBinding();
      bindBox.hidden = true;
      commandsBox.hidden = true;
      startRemoval();
      return;
    }
    gone('Deprovisioned: the provider removed the service and everything it made; the contract has ended.');
  }

  function gone(text) {
    record = { ...record, phase: 'gone' };
    bindBox.hidden = true;
    commandsBox.hidden = true;
    showRemove(removalSteps('gone', 'done'), '');
    replaceChildren(notice, h('p', { class: 'notice notice--ok', 'data-state': 'gone', text }));
    ctx.announce(text);
  }

  // --- start where the catalog's record says -------------------------------------------
  // A binding being deleted is a removal under way (this page unbinds only to deprovision):
  // follow it, then the instance's.
  if (record.phase !== 'deprovisioning' && record.binding?.state === 'deleting') {
    update({ phaseBefore: 'ready', phase: 'deprovisioning', removal: 'unbind', removalOperation: record.binding.operation ?? 'done' });
  } else if (record.phase === 'deprovisioning') {
    update({ phaseBefore: 'ready', removal: 'remove', removalOperation: record.operation ?? 'done' });
  }
  showProvision(record.phase === 'provisioning' ? { state: 'in progress', description: 'in progress' } : { state: record.phase === 'failed' ? 'failed' : 'succeeded' });
  showRemove();
  if (record.phase === 'deprovisioning') {
    if (record.removalOperation) followRemoval();
    else startRemoval();
  } else {
    followProvision();
  }
  return () => {
    disposed = true;
    clearTimeout(timer);
    ctx.store.removeEventListener('change', onStore);
  };
}
