// Mapping the catalog's 400 messages ("plans.basic.resources.memory: …") to
// the form field they name.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { matchFieldPath } from '../../../webui/js/fields.js';

const paths = new Map([
  ['id', 1], ['name', 2], ['type', 3], ['plans', 4],
  ['plans.basic', 5], ['plans.basic.name', 6], ['plans.basic.cost', 7], ['plans.basic.resources', 8],
  ['plans.basic.resources.memory', 9], ['plans.basic.resources.nvidia.com/gpu', 10],
  ['plans.basic.resources.nvidia.com', 11],
]);

test('the field the server names explicitly wins', () => {
  assert.equal(matchFieldPath('anything', paths, 'plans.basic.cost'), 'plans.basic.cost');
});

test('the longest path at the start of the message', () => {
  assert.equal(matchFieldPath("plans.basic.resources.memory: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'", paths), 'plans.basic.resources.memory');
  assert.equal(matchFieldPath('plans.basic.resources.nvidia.com/gpu: must not be negative', paths), 'plans.basic.resources.nvidia.com/gpu');
  assert.equal(matchFieldPath('plans.basic.cost: must not be negative', paths), 'plans.basic.cost');
  assert.equal(matchFieldPath('name: must not be empty', paths), 'name');
  assert.equal(matchFieldPath('plans: must hold at least one plan', paths), 'plans');
});

test('single words inside a message are not mistaken for fields', () => {
  assert.equal(matchFieldPath('the name of the plan must be given', paths), null);
  assert.equal(matchFieldPath('body: expected value at line 1 column 2', paths), null);
  // A path that is only the prefix of a longer, unknown one does not match.
  assert.equal(matchFieldPath('plans.basic.resources.memoryx: bad', paths), null);
});

test('a path inside a sentence, ending with punctuation', () => {
  assert.equal(matchFieldPath('invalid value at plans.basic.cost.', paths), 'plans.basic.cost');
});
