// The purchase form's checks: contract lengths in the project's duration
// grammar, and consumer cluster IDs as Liqo writes them.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { clusterIdProblem, durationWords, parseContractDuration, purchaseBody, v1ClusterIdProblem } from '../../../webui/js/purchase-terms.js';

test('contract lengths: units, combinations and bare seconds', () => {
  for (const [text, seconds] of [
    ['30d', 30 * 86400], ['12h', 43200], ['1h 30m', 5400], ['1h30m', 5400], ['2w', 14 * 86400],
    ['3600', 3600], [' 45 min ', 2700], ['1.5h', 5400], ['90s', 90], ['2days', 172800],
  ]) {
    assert.deepEqual(parseContractDuration(text), { seconds }, text);
  }
  assert.deepEqual(parseContractDuration(''), { seconds: null }, 'empty: the catalog\'s longest');
});

test('contract lengths: what is wrong, in words', () => {
  assert.match(parseContractDuration('30x').error, /“x” is not a unit/);
  assert.match(parseContractDuration('-1d').error, /never negative/);
  assert.match(parseContractDuration('1.5').error, /fraction needs a unit/);
  assert.match(parseContractDuration('0').error, /at least 1 second/);
  assert.match(parseContractDuration('1.0001h').error, /whole seconds/);
  assert.match(parseContractDuration('tomorrow').error, /write a length such as 30d/);
  assert.deepEqual(parseContractDuration('31d', 30 * 86400), { error: 'At most 30 days (the catalog\'s longest contract)' });
  assert.deepEqual(parseContractDuration('30d', 30 * 86400), { seconds: 30 * 86400 });
  assert.equal(durationWords(5400), '1 hour 30 minutes');
});

test('consumer cluster IDs', () => {
  assert.equal(clusterIdProblem(''), null);
  assert.equal(clusterIdProblem('b3f1c2d4-0a1b-4c5d-8e9f-0123456789ab'), null);
  assert.equal(clusterIdProblem('rome-consumer_1.~x'), null);
  assert.match(clusterIdProblem('my cluster/1'), /not spaces, “\/”/);
  assert.match(clusterIdProblem('x'.repeat(129)), /At most 128 characters \(this has 129\)/);
  assert.match(clusterIdProblem('..'), /Must not be/);
});

test('Liqo v1 cluster IDs: required, a DNS-1123 label', () => {
  assert.match(v1ClusterIdProblem(''), /Required: this provider peers with Liqo v1/);
  assert.equal(v1ClusterIdProblem('rome-consumer-1'), null);
  assert.match(v1ClusterIdProblem('Rome_1'), /lower-case letters, digits and hyphens/);
  assert.match(v1ClusterIdProblem('x'.repeat(64)), /At most 63 characters/);
  assert.deepEqual(Object.keys(purchaseBody({ clusterID: '', duration: '' }, null, { v1: true }).errors), ['consumerClusterID']);
  assert.deepEqual(purchaseBody({ clusterID: 'rome', duration: '' }, null, { v1: true }), { body: { consumerClusterID: 'rome' } });
});

test('the purchase body: only what was given, or every error at once', () => {
  assert.deepEqual(purchaseBody({ clusterID: '', duration: '' }), { body: {} });
  assert.deepEqual(purchaseBody({ clusterID: ' rome ', duration: '12h' }), { body: { consumerClusterID: 'rome', durationSeconds: 43200 } });
  assert.deepEqual(Object.keys(purchaseBody({ clusterID: 'a b', duration: 'soon' }).errors), ['consumerClusterID', 'duration']);
});
