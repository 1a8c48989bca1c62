// The contract page's peering steps, from the catalog's contract state and
// the `Code: words` reason purchase-controller reports.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { peeringSteps, splitReason } from '../../../webui/js/contract-steps.js';

const statuses = (c) => Object.fromEntries(peeringSteps(c).steps.map((s) => [s.key, s.status]));

test('a reason is split into the step code and the words; free text has no code', () => {
  assert.deepEqual(splitReason('WaitingForNonce: the provider fills it'), { code: 'WaitingForNonce', words: 'the provider fills it' });
  assert.deepEqual(splitReason('the peering broke: no route'), { code: null, words: 'the peering broke: no route' });
  assert.deepEqual(splitReason(undefined), { code: null, words: null });
});

test('each reported step moves the progress on, and the manual command is only the fallback', () => {
  const fresh = { state: 'pending', peeringState: { state: 'awaitingCredentials' } };
  assert.deepEqual(statuses(fresh), { issued: 'current', released: 'todo', authenticating: 'todo', peered: 'todo', granted: 'todo', ready: 'todo' });
  assert.equal(peeringSteps(fresh).fallback, true, 'no controller has reported');

  const attached = { state: 'pending', peeringState: { state: 'credentialsReady' } };
  assert.deepEqual(statuses(attached), { issued: 'done', released: 'current', authenticating: 'todo', peered: 'todo', granted: 'todo', ready: 'todo' });

  const signing = { ...attached, reason: 'WaitingForSignature: waiting for the provider to sign' };
  assert.deepEqual(statuses(signing), { issued: 'done', released: 'done', authenticating: 'current', peered: 'todo', granted: 'todo', ready: 'todo' });
  assert.equal(peeringSteps(signing).fallback, false);
  assert.equal(peeringSteps(signing).words, 'waiting for the provider to sign');

  assert.equal(statuses({ ...attached, reason: 'WaitingForPeering: Liqo makes it' }).peered, 'current');
  assert.deepEqual(statuses({ state: 'peered', reason: 'WaitingForProvider: deciding' }), { issued: 'done', released: 'done', authenticating: 'done', peered: 'done', granted: 'current', ready: 'todo' });
  assert.equal(statuses({ state: 'granted', reason: 'WaitingForLiqo: offloading web' }).ready, 'current');
  const ready = peeringSteps({ state: 'ready', reason: 'Ready: peered, granted and offloaded' });
  assert.ok(ready.steps.every((s) => s.status === 'done'));
  assert.equal(ready.fallback, false);
  // An older controller: states without a reason.
  assert.equal(statuses({ state: 'granted' }).ready, 'current');
});

test('a controller that does not peer by itself keeps the command; a failure marks its step', () => {
  const manual = peeringSteps({ state: 'pending', reason: 'PeeringCommandRequired: run status.peeringCommand' });
  assert.equal(manual.fallback, true);
  assert.equal(manual.steps.find((s) => s.key === 'peered').status, 'current');
  assert.equal(statuses({ state: 'failed', reason: 'the provider denied the ResourceSlice: no' }).authenticating, 'failed');
  assert.equal(statuses({ state: 'failed', reason: 'NonceMismatch: signed for another nonce' }).authenticating, 'failed');
  assert.deepEqual(statuses({ state: 'failed', reason: 'ResourcesDenied: the provider denied the ResourceSlice: no' }), { issued: 'done', released: 'done', authenticating: 'done', peered: 'done', granted: 'failed', ready: 'todo' });
});
