// The offer editor's browser-side checks: every problem of a form at once,
// in plain words, and the catalog's own messages reworded the same way.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { costProblem, idProblem, offerProblems, plainServerMessage, quantityProblem } from '../../../webui/js/offer-rules.js';
import { shortQuantityProblem, suggestQuantity } from '../../../webui/js/quantity.js';

test('a blank form: every problem listed once, with its field', () => {
  const problems = offerProblems({
    id: '', name: '', type: '',
    plans: [{ key: 'basic', name: '', cost: '', rows: [{ name: 'cpu', value: '' }, { name: '', value: '' }] }],
  });
  assert.deepEqual(problems.map((p) => p.path), ['id', 'name', 'type', 'plans.0.cost', 'plans.0.rows.0.value']);
});

test('duplicate plan ids and resource names, and no plans', () => {
  assert.deepEqual(offerProblems({ id: 'a', name: 'n', type: 't', plans: [] }).map((p) => p.path), ['plans']);
  const problems = offerProblems({
    id: 'a', name: 'n', type: 't',
    plans: [
      { key: 'x', name: '', cost: '1', rows: [{ name: 'cpu', value: '1' }, { name: 'cpu', value: '2' }] },
      { key: 'x', name: '', cost: '1', rows: [] },
    ],
  });
  assert.deepEqual(problems.map((p) => p.path), ['plans.0.rows.1.name', 'plans.1.key']);
});

test('ids use the catalog alphabet', () => {
  assert.equal(idProblem('storage-basic_1.v2~x', 'an ID'), null);
  assert.match(idProblem('a b', 'an offer ID'), /not spaces/);
  assert.match(idProblem('..', 'an ID'), /cannot be/);
  assert.match(idProblem('x'.repeat(129), 'an ID'), /at most 128/);
});

test('costs: non-negative decimals with at most 9 fraction digits', () => {
  for (const ok of ['0', '1.0', '2.5', '.5', '0.000000001']) assert.equal(costProblem(ok), null, ok);
  assert.match(costProblem('-1'), /negative/);
  assert.match(costProblem('1,5'), /not a number/);
  assert.match(costProblem('0.0000000001'), /at most 9 digits/);
});

test('quantities: plain words and a guess at what was meant', () => {
  assert.equal(quantityProblem('4Gi'), null);
  assert.match(quantityProblem('-1'), /negative/);
  assert.equal(suggestQuantity('5GB'), '5GB is not a Kubernetes quantity — did you mean 5G or 5Gi?');
  assert.equal(suggestQuantity('16 Gi'), '16 Gi is not a Kubernetes quantity — did you mean 16Gi?');
  assert.equal(suggestQuantity('4gib'), '4gib is not a Kubernetes quantity — did you mean 4Gi?');
  assert.match(suggestQuantity('lots'), /Write a number with an optional unit/);
  assert.equal(shortQuantityProblem('5GB'), 'Try 5G or 5Gi');
  assert.equal(shortQuantityProblem('lots'), 'Not a quantity (e.g. 4Gi)');
});

test('server messages reworded for the field they name', () => {
  const raw = "plans.small.resources.memory: quantities must match the regular expression '^([+-]?[0-9.]+)…$'";
  assert.equal(plainServerMessage(raw, 'quantity', '5GB'), '5GB is not a Kubernetes quantity — did you mean 5G or 5Gi?');
  assert.equal(plainServerMessage('description: must be at most 8192 bytes', null), 'Must be at most 8192 bytes');
});
