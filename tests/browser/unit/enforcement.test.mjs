// What each Liqo enforcement level the catalog sends means for a buyer.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { enforcementOf } from '../../../webui/js/enforcement.js';
import { NormalizedOffer } from '../../../webui/js/model.js';

test('every level the catalog sends has its own words', () => {
  const levels = ['off', 'none', 'soft', 'hard', 'unknown'];
  const labels = new Set(levels.map((level) => enforcementOf(level).label));
  assert.equal(labels.size, levels.length, 'one label per level');
  assert.equal(enforcementOf('hard').tone, 'ok');
  assert.equal(enforcementOf('off').tone, 'danger');
  assert.match(enforcementOf('off').explain, /does not check/);
  // Absent, or a name this UI does not know: not reported, never a level.
  for (const other of ['', undefined, 'toString', 'Hard']) {
    assert.equal(enforcementOf(other).label, 'Enforcement not reported', String(other));
  }
});

test('offers carry their provider\'s level as sent', () => {
  assert.equal(new NormalizedOffer({ id: 'a', enforcement: 'soft' }).enforcement, 'soft');
  assert.equal(new NormalizedOffer({ id: 'a' }).enforcement, '');
});
