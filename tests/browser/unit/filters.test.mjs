// What the consumer's filters hide: the same rules as the catalog's
// GET /offers (all plan conditions hold for one and the same plan).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { emptyFilters, lowestCost, offerMatches, parseFilters } from '../../../webui/js/filters.js';
import { normalizeOffer } from '../../../webui/js/model.js';

const storage = normalizeOffer({
  id: 'storage-basic', name: 'Storage-optimized offer', type: 'storage', clusterID: 'c2', clusterName: 'turin',
  plans: {
    basic: { name: 'plan-basic', cost: '1.0', resources: { cpu: '1', memory: '2G', storage: '100G' } },
    medium: { planName: 'plan-medium', planID: 'medium', cost: '2.0', resources: { cpu: '2', memory: '4G', storage: '300G' } },
  },
});
const gpu = normalizeOffer({
  id: 'gpu', name: 'GPU', type: 'gpu', clusterID: 'c1', clusterName: 'milan',
  plans: {
    small: { name: 'small', cost: '2.5', resources: { cpu: '4', memory: '16Gi', 'nvidia.com/gpu': '1' } },
    big: { name: 'big', cost: '6', resources: { cpu: '16', memory: '64Gi', 'nvidia.com/gpu': '2', 'amd.com/gpu': '2', 'ephemeral-storage': '1Ti' } },
  },
});

function shown(raw) {
  const { active, errors } = parseFilters({ ...emptyFilters(), ...raw, min: { ...emptyFilters().min, ...raw.min } });
  return { ids: [storage, gpu].filter((o) => offerMatches(o, active)).map((o) => o.id), errors };
}

test('no filter shows everything', () => {
  assert.deepEqual(shown({}).ids, ['storage-basic', 'gpu']);
});

test('type matches exactly', () => {
  assert.deepEqual(shown({ type: 'storage' }).ids, ['storage-basic']);
  assert.deepEqual(shown({ type: 'stor' }).ids, []);
});

test('minimums compare as quantities', () => {
  assert.deepEqual(shown({ min: { memory: '4G' } }).ids, ['storage-basic', 'gpu']);
  assert.deepEqual(shown({ min: { memory: '4Gi' } }).ids, ['gpu']);
  assert.deepEqual(shown({ min: { cpu: '1500m' } }).ids, ['storage-basic', 'gpu']);
  assert.deepEqual(shown({ min: { cpu: '2001m' } }).ids, ['gpu']);
});

test('storage counts ephemeral-storage; GPUs add up across vendors', () => {
  assert.deepEqual(shown({ min: { storage: '500Gi' } }).ids, ['gpu']);
  assert.deepEqual(shown({ min: { gpu: '4' } }).ids, ['gpu']);
  assert.deepEqual(shown({ min: { gpu: '5' } }).ids, []);
});

test('cost and resources must hold for the same plan', () => {
  assert.deepEqual(shown({ maxCost: '1.5' }).ids, ['storage-basic']);
  assert.deepEqual(shown({ maxCost: '1.5', min: { memory: '4G' } }).ids, []);
  assert.deepEqual(shown({ maxCost: '2', min: { memory: '4G' } }).ids, ['storage-basic']);
});

test('a bad filter is reported and not applied', () => {
  const { ids, errors } = shown({ maxCost: 'cheap', min: { memory: '4 Gi', cpu: '-1' } });
  assert.deepEqual(ids, ['storage-basic', 'gpu']);
  assert.deepEqual(Object.keys(errors).sort(), ['maxCost', 'min.cpu', 'min.memory']);
});

test('normalises both plan-name spellings and finds the cheapest plan', () => {
  assert.deepEqual(storage.plans.map((p) => [p.key, p.name]), [['basic', 'plan-basic'], ['medium', 'plan-medium']]);
  assert.equal(lowestCost(gpu).key, 'small');
});

test('text search, provider and label filters', async () => {
  const { normalizeOffer } = await import('../../../webui/js/model.js');
  const { offerMatches, parseFilters, emptyFilters, parseLabels } = await import('../../../webui/js/filters.js');
  const offer = normalizeOffer({
    id: 'gpu-a', name: 'GPU inference', type: 'gpu', description: 'NVIDIA A100', clusterID: 'c1', clusterName: 'milan-edge',
    labels: { tier: 'gold', region: 'eu' }, plans: { a100: { name: 'gpu-a100', cost: '2.5', resources: { cpu: '12' } } },
  });
  const matches = (raw) => offerMatches(offer, parseFilters({ ...emptyFilters(), ...raw }).active);
  assert.equal(matches({ q: 'a100 MILAN' }), true);
  assert.equal(matches({ q: 'a100 turin' }), false);
  assert.equal(matches({ provider: 'c1' }), true);
  assert.equal(matches({ provider: 'c2' }), false);
  assert.equal(matches({ labels: 'tier=gold, region=eu' }), true);
  assert.equal(matches({ labels: 'tier=silver' }), false);
  assert.match(parseLabels('tier').error, /key=value/);
  assert.equal(parseFilters({ ...emptyFilters(), labels: 'tier' }).errors.labels !== undefined, true);
  assert.equal(offer.plans[0].numbers.costPerCpu, 2.5 / 12);
});
