// The service page's steps, from the broker's last_operation answers.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { bindingProgress, contractNamed, kubectlCommands, namespaceNamed, provisionProgress, provisionStepOf } from '../../../webui/js/service-steps.js';

const statuses = (p) => Object.fromEntries(p.steps.map((s) => [s.key, s.status]));

test('the catalog\'s and the provider\'s descriptions move provisioning on, never back', () => {
  const first = provisionProgress({ state: 'in progress', description: 'in progress' });
  assert.deepEqual(statuses(first), { bought: 'current', peering: 'todo', creating: 'todo', ready: 'todo' });
  const bought = provisionProgress({ state: 'in progress', description: 'purchased: contract r-1; waiting for the provider to set the service up' }, first.reached);
  assert.deepEqual(statuses(bought), { bought: 'done', peering: 'current', creating: 'todo', ready: 'todo' });
  const creating = provisionProgress({ state: 'in progress', description: 'Creating: applying 2 objects in namespace svc-r-1' }, bought.reached);
  assert.deepEqual(statuses(creating), { bought: 'done', peering: 'done', creating: 'current', ready: 'todo' });
  assert.equal(creating.words, 'applying 2 objects in namespace svc-r-1');
  const vague = provisionProgress({ state: 'in progress', description: 'still working' }, creating.reached);
  assert.equal(statuses(vague).creating, 'current', 'words naming no step keep the furthest one');
  const failed = provisionProgress({ state: 'failed', description: 'the template db broke' }, creating.reached);
  assert.deepEqual(statuses(failed), { bought: 'done', peering: 'done', creating: 'failed', ready: 'todo' });
  const done = provisionProgress({ state: 'succeeded', description: 'ready' }, creating.reached);
  assert.deepEqual(statuses(done), { bought: 'done', peering: 'done', creating: 'done', ready: 'done' });
});

test('free words name their step', () => {
  assert.equal(provisionStepOf('Peering: the Purchase waits'), 'peering');
  assert.equal(provisionStepOf('waiting for the peering with the customer'), 'peering');
  assert.equal(provisionStepOf('namespace offloaded; rendering templates'), 'peering', 'peering words win: the step is not past them yet');
  assert.equal(provisionStepOf('rendering the templates'), 'creating');
  assert.equal(provisionStepOf('something else'), null);
});

test('binding steps, the namespace a provider names, and the kubectl commands', () => {
  assert.deepEqual(statuses(bindingProgress(null)), { requested: 'todo', credentials: 'todo', bound: 'todo' });
  assert.deepEqual(statuses(bindingProgress({ state: 'in progress' })), { requested: 'done', credentials: 'current', bound: 'todo' });
  assert.deepEqual(statuses(bindingProgress({ state: 'failed' })), { requested: 'done', credentials: 'failed', bound: 'todo' });
  assert.deepEqual(statuses(bindingProgress({ state: 'succeeded' })), { requested: 'done', credentials: 'done', bound: 'done' });
  assert.equal(namespaceNamed('applied in namespace svc-r-1.'), 'svc-r-1');
  assert.equal(namespaceNamed('no such thing'), null);
  assert.equal(contractNamed('purchased: contract 3fa9; waiting for the provider to set the service up'), '3fa9');
  assert.equal(contractNamed('peering with the customer\'s cluster'), null);
  assert.deepEqual(kubectlCommands({ appNamespace: 'shop', instanceNamespace: 'svc-r-1', providerClusterID: 'prov-1' }),
    ['kubectl get all,secrets -n shop', 'kubectl get all,secrets -n svc-r-1-prov-1']);
  assert.deepEqual(kubectlCommands({ appNamespace: 'shop', instanceNamespace: null, providerClusterID: 'prov-1' }),
    ['kubectl get all,secrets -n shop', 'kubectl get namespaces -l liqo.io/remote-cluster-id=prov-1']);
});
