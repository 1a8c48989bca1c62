// The page's offer store: snapshots replace, upserts and deletes patch,
// stale versions are dropped, and every change is reported once.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { OfferStore } from '../../../webui/js/store.js';

const offer = (id, version, name = id) => ({ id, version, name, type: 't', clusterID: 'c', plans: {} });

function recorder(store) {
  const events = [];
  store.addEventListener('change', (e) => events.push({
    added: e.detail.added.map((o) => o.id),
    updated: e.detail.updated.map((o) => o.id),
    removed: e.detail.removed.map((o) => o.id),
    initial: e.detail.initial,
  }));
  return events;
}

test('a snapshot replaces everything and reports the difference', () => {
  const store = new OfferStore();
  const events = recorder(store);
  store.replaceAll([offer('a', 1), offer('b', 1)], 'feed');
  store.replaceAll([offer('b', 2, 'B'), offer('c', 1)], 'feed');
  assert.deepEqual(events, [
    { added: ['a', 'b'], updated: [], removed: [], initial: true },
    { added: ['c'], updated: ['b'], removed: ['a'], initial: false },
  ]);
  assert.deepEqual(store.all().map((o) => o.id).sort(), ['b', 'c']);
  assert.equal(store.get('b').name, 'B');
});

test('an unchanged snapshot keeps the same objects and reports nothing', () => {
  const store = new OfferStore();
  store.replaceAll([offer('a', 1)], 'feed');
  const before = store.get('a');
  const events = recorder(store);
  store.replaceAll([offer('a', 1)], 'feed');
  assert.equal(store.get('a'), before);
  assert.deepEqual(events, []);
});

test('upserts keep the newest version; deletes remove', () => {
  const store = new OfferStore();
  store.replaceAll([], 'feed');
  const events = recorder(store);
  store.upsert(offer('a', 3, 'three'), 'feed');
  store.upsert(offer('a', 2, 'two'), 'rest'); // older: ignored
  store.upsert(offer('a', 4, 'four'), 'feed');
  store.remove('a', 'feed');
  store.remove('a', 'feed'); // already gone: no event
  assert.deepEqual(events.map((e) => [e.added, e.updated, e.removed]), [[['a'], [], []], [[], ['a'], []], [[], [], ['a']]]);
  assert.equal(store.get('a'), null);
});

test('replaceWhere only touches the matching offers', () => {
  const store = new OfferStore();
  store.replaceAll([{ ...offer('mine', 1), clusterID: 'me' }, { ...offer('theirs', 1), clusterID: 'them' }], 'feed');
  store.replaceWhere((o) => o.clusterID === 'me', [{ ...offer('mine2', 1), clusterID: 'me' }], 'rest');
  assert.deepEqual(store.all().map((o) => o.id).sort(), ['mine2', 'theirs']);
});

test('offers without an id are ignored', () => {
  const store = new OfferStore();
  store.replaceAll([{ name: 'no id' }, offer('a', 1), null], 'feed');
  assert.deepEqual(store.all().map((o) => o.id), ['a']);
});

test('plans are parsed on first use, then in idle slices after a snapshot; each change moves the generation', async () => {
  const store = new OfferStore();
  const withPlans = (id) => ({ ...offer(id, 1), plans: { p: { name: 'p', cost: '1', resources: { memory: '4Gi' } } } });
  store.replaceAll(Array.from({ length: 250 }, (_, i) => withPlans(`o${i}`)), 'feed');
  assert.equal(store.generation, 1);
  const first = store.get('o0');
  // Nothing parsed yet: the first page can show before any quantity is parsed.
  assert.equal(first.parsed, false);
  assert.equal(first.searchText.includes('o0'), true);
  assert.equal(first.parsed, false, 'searching does not parse quantities');
  assert.equal(first.plans[0].resourceMap.get('memory').value, '4Gi');
  assert.equal(first.parsed, true);
  // The idle pass (setTimeout here, requestIdleCallback in a browser) parses the rest.
  const deadline = Date.now() + 15000;
  while (store.all().some((o) => !o.parsed) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  assert.equal(store.all().every((o) => o.parsed), true);
  store.upsert({ ...withPlans('o1'), version: 2, name: 'changed' }, 'feed');
  assert.equal(store.generation, 2);
  store.upsert({ ...withPlans('o1'), version: 1 }, 'feed'); // older: ignored, no change
  assert.equal(store.generation, 2);
});
