// Where a service instance and its binding stand, as steps, read from the
// broker's `last_operation` answers ({state, description}). The catalog
// words the first part (`in progress`, then "purchased: contract …; waiting
// for the provider …"); then the provider's service-controller reports what
// it does, ideally as `Peering: words` or `Creating: words` (the `Code:
// words` shape purchase-controller's reasons have), else in free words
// (peering words mention peering; creating words creating, applying or
// rendering). Steps never go back: a description that names no step keeps
// the furthest one reached. Pure (no DOM), so node tests it.

import { shellWord } from './shell.js';

/** The steps of provisioning, in order. */
export const PROVISION_STEPS = [
  { key: 'bought', label: 'Contract bought' },
  { key: 'peering', label: 'Peering the provider with your cluster' },
  { key: 'creating', label: 'Creating the service' },
  { key: 'ready', label: 'Service ready' },
];

/** The steps of binding, in order. */
export const BINDING_STEPS = [
  { key: 'requested', label: 'Binding requested' },
  { key: 'credentials', label: 'Credentials made, copied into your namespace' },
  { key: 'bound', label: 'Bound' },
];

const CODES = { Peering: 'peering', Creating: 'creating' };

/** The provisioning step a `description` is about, or null when it names none. */
export function provisionStepOf(description) {
  const text = String(description ?? '').trim();
  const code = /^([A-Z][A-Za-z]*): /.exec(text);
  if (code && CODES[code[1]]) return CODES[code[1]];
  if (text === '' || text === 'in progress') return 'bought';
  if (/^purchased: /.test(text)) return 'peering';
  if (/\bpeer|offload|kubeconfig|resource ?slice/i.test(text)) return 'peering';
  if (/\bcreat|\bapply|\bappli|\brender|\btemplat|\bdeploy|\bwaiting for .*(pod|ready)/i.test(text)) return 'creating';
  return null;
}

/** `Code: words` → words; anything else as it is. */
export function stepWords(description) {
  const text = String(description ?? '').trim();
  const code = /^([A-Z][A-Za-z]*): ([\s\S]*)$/.exec(text);
  return code && CODES[code[1]] ? code[2] : text;
}

function stepsAt(list, current, status) {
  return list.map((step, i) => ({
    ...step,
    status: i < current ? 'done' : i === current ? status : 'todo',
  }));
}

/**
 * The provisioning steps for an answer `op` ({state, description}) given
 * the furthest step reached before (`reached`, an index, -1 at first):
 * `{ steps, reached, words }`, each step `done`, `current`, `failed` or `todo`.
 */
export function provisionProgress(op, reached = -1) {
  const keys = PROVISION_STEPS.map((s) => s.key);
  if (op?.state === 'succeeded') {
    return { steps: stepsAt(PROVISION_STEPS, keys.length, 'done'), reached: keys.length, words: stepWords(op.description) };
  }
  const named = provisionStepOf(op?.description);
  const at = Math.max(reached, named ? keys.indexOf(named) : 0, 0);
  const status = op?.state === 'failed' ? 'failed' : 'current';
  return { steps: stepsAt(PROVISION_STEPS, at, status), reached: at, words: stepWords(op?.description) };
}

/** The binding steps for an answer `op` ({state, description}); null `op`: not asked yet. */
export function bindingProgress(op) {
  if (!op) return { steps: stepsAt(BINDING_STEPS, -1, 'todo'), words: '' };
  if (op.state === 'succeeded') return { steps: stepsAt(BINDING_STEPS, BINDING_STEPS.length, 'done'), words: op.description ?? '' };
  return { steps: stepsAt(BINDING_STEPS, 1, op.state === 'failed' ? 'failed' : 'current'), words: op.description ?? '' };
}

/** The contract the catalog bought for the instance ("purchased: contract 3f…; waiting …"), or null. */
export function contractNamed(description) {
  const match = /^purchased: contract ([A-Za-z0-9._-]+)/.exec(String(description ?? ''));
  return match ? match[1] : null;
}

/** A namespace a provider's description names ("… in namespace svc-1a2b"), or null. */
export function namespaceNamed(description) {
  const match = /\bnamespace ([a-z0-9]([-a-z0-9]*[a-z0-9])?)\b/.exec(String(description ?? ''));
  return match ? match[1] : null;
}

/**
 * The commands that show the running service in the customer's cluster:
 * the application namespace (where the binding's Secret is copied) and the
 * namespace Liqo made for the offloaded instance namespace — named
 * `<instance namespace>-<provider cluster ID>` (Liqo's DefaultName mapping)
 * when the provider said which one, else found by Liqo's label.
 */
export function kubectlCommands({ appNamespace, instanceNamespace, providerClusterID }) {
  const commands = [];
  if (appNamespace) commands.push(`kubectl get all,secrets -n ${shellWord(appNamespace)}`);
  if (instanceNamespace && providerClusterID) {
    commands.push(`kubectl get all,secrets -n ${shellWord(`${instanceNamespace}-${providerClusterID}`)}`);
  } else if (providerClusterID) {
    commands.push(`kubectl get namespaces -l ${shellWord(`liqo.io/remote-cluster-id=${providerClusterID}`)}`);
  }
  return commands;
}
