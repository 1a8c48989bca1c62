// Offers as JSON or YAML files: what the editor exports reads back the same,
// and what it cannot read is refused naming the line.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { fromYaml, offerDocument, OfferFileError, readOfferFile, toYaml } from '../../../webui/js/offer-file.js';

const form = {
  id: 'gpu-large', name: 'GPU compute: "fast"', type: 'gpu', description: 'NVIDIA # not a comment\nsecond line',
  plans: [
    { key: 'small', name: 'gpu-small', cost: '2.5', rows: [{ name: 'cpu', value: '4' }, { name: 'nvidia.com/gpu', value: '1' }] },
    { key: 'true', name: 'yes', cost: '0', rows: [] },
  ],
};

test('YAML and JSON exports read back to the same form', () => {
  const doc = offerDocument(form);
  assert.deepEqual(readOfferFile(toYaml(doc)), form);
  assert.deepEqual(readOfferFile(JSON.stringify(doc)), form);
});

test('YAML comments, quotes and blank lines', () => {
  const doc = fromYaml("# an offer\nname: 'It''s fine' # trailing\n\nplans:\n  basic:\n    cost: \"1.0\"\n");
  assert.deepEqual(doc, { name: "It's fine", plans: { basic: { cost: '1.0' } } });
});

test('what an offer file cannot hold is refused, naming the line', () => {
  assert.throws(() => fromYaml('plans:\n  - basic\n'), (e) => e instanceof OfferFileError && /line 2/.test(e.message));
  assert.throws(() => fromYaml('name: a\nname: b\n'), /line 2: “name” appears twice/);
  assert.throws(() => fromYaml('description: |\n  text\n'), /line 1/);
  assert.throws(() => readOfferFile('{"name": "x"}'), /no “plans” mapping/);
  assert.throws(() => readOfferFile('{"name": '), /JSON cannot be read/);
});
