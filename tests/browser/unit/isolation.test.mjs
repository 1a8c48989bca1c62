// What each tenant-isolation level the catalog sends means for a buyer, shown
// beside the enforcement level.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { isolationOf } from '../../../webui/js/isolation.js';
import { enforcementOf } from '../../../webui/js/enforcement.js';
import { SELF_CHECKS } from '../../../webui/js/self-checks.js';
import { NormalizedOffer } from '../../../webui/js/model.js';

test('every isolation level the catalog sends has its own words', () => {
  const levels = ['enforced', 'unverified', 'failed', 'off'];
  const labels = new Set(levels.map((level) => isolationOf(level).label));
  assert.equal(labels.size, levels.length, 'one label per level');
  assert.equal(isolationOf('enforced').tone, 'ok');
  assert.equal(isolationOf('unverified').tone, 'warn');
  assert.equal(isolationOf('failed').tone, 'danger');
  assert.equal(isolationOf('off').tone, 'danger');
  assert.match(isolationOf('enforced').explain, /cannot reach your pods/);
  assert.match(isolationOf('failed').explain, /can reach your pods/);
  // Absent, or a name this UI does not know (an enforcement level among them): not reported, never a level.
  for (const other of ['', undefined, 'toString', 'Enforced', 'hard']) {
    assert.equal(isolationOf(other).label, 'Isolation not reported', String(other));
  }
});

test('offers carry their provider\'s isolation level as sent, shown after enforcement', () => {
  assert.equal(new NormalizedOffer({ id: 'a', isolation: 'failed' }).isolation, 'failed');
  assert.equal(new NormalizedOffer({ id: 'a' }).isolation, '');
  assert.deepEqual(SELF_CHECKS.map((check) => check.field), ['enforcement', 'isolation']);
  assert.equal(SELF_CHECKS[0].of, enforcementOf);
  assert.equal(SELF_CHECKS[1].of, isolationOf);
  const offer = new NormalizedOffer({ id: 'a', enforcement: 'hard', isolation: 'unverified' });
  assert.deepEqual(SELF_CHECKS.map(({ field, of }) => of(offer[field]).label), ['Enforced (hard)', 'Isolation unverified']);
});
