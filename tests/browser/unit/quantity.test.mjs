// The UI's Kubernetes quantity parser: the grammar and suffixes of
// resource.Quantity, exact comparison (no floating point).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { compare, parseDecimal, parseQuantity, QuantityError, toPlainString } from '../../../webui/js/quantity.js';

const exact = (text) => toPlainString(parseQuantity(text));

test('suffixes: binary SI, decimal SI and exponents', () => {
  const cases = {
    '1Ki': '1024', '1Mi': '1048576', '1Gi': '1073741824', '1Ti': '1099511627776',
    '1Pi': '1125899906842624', '1Ei': '1152921504606846976',
    '1n': '0.000000001', '1u': '0.000001', '500m': '0.5', '1': '1', '2k': '2000',
    '4M': '4000000', '4G': '4000000000', '1T': '1000000000000', '1P': '1000000000000000', '1E': '1000000000000000000',
    '1e3': '1000', '1E3': '1000', '1e-3': '0.001', '1.5e+2': '150',
    '1.5Gi': '1610612736', '.5': '0.5', '1.': '1', '+2': '2', '-1': '-1', '0': '0', '0.0': '0',
  };
  for (const [input, want] of Object.entries(cases)) assert.equal(exact(input), want, input);
});

test('rejects what Kubernetes rejects', () => {
  for (const bad of ['', ' 1', '1 ', '1K', '1gi', '1GiB', '1e', 'e3', '.', '1.2.3', '1 Gi', '--1', 'Gi', '1m3', '0x10', 'lots']) {
    assert.throws(() => parseQuantity(bad), QuantityError, JSON.stringify(bad));
  }
});

test('absurd exponents are refused instead of building huge numbers', () => {
  assert.throws(() => parseQuantity('1e100000'), /out of range/);
});

test('compares exactly across formats', () => {
  const cmp = (a, b) => compare(parseQuantity(a), parseQuantity(b));
  assert.equal(cmp('1Gi', '1073741824'), 0);
  assert.equal(cmp('100m', '0.1'), 0);
  assert.equal(cmp('1000m', '1'), 0);
  assert.equal(cmp('4G', '4Gi'), -1);
  assert.equal(cmp('4Gi', '4G'), 1);
  assert.equal(cmp('1e3', '1k'), 0);
  assert.equal(cmp('1n', '0'), 1);
  // Beyond what a double can tell apart.
  assert.equal(cmp('9007199254740993', '9007199254740992'), 1);
  assert.equal(cmp('1Ei', '1152921504606846975'), 1);
});

test('costs are plain decimals', () => {
  assert.equal(toPlainString(parseDecimal('1.0')), '1');
  assert.equal(toPlainString(parseDecimal('0.25')), '0.25');
  assert.equal(toPlainString(parseDecimal(2.5)), '2.5');
  assert.equal(compare(parseDecimal('2'), parseDecimal('2.000')), 0);
  assert.throws(() => parseDecimal('1Gi'), QuantityError);
  assert.throws(() => parseDecimal(''), QuantityError);
});

test('compareQuick answers as compare does, near ties included', async () => {
  const { compareQuick } = await import('../../../webui/js/quantity.js');
  const cases = [['1Gi', '1073741824'], ['1Gi', '1073741825'], ['4G', '4Gi'], ['0.1', '100m'], ['1', '1000000001n'], ['0', '1n'], ['-1', '1'], ['1e3', '1k'], ['999999999999999999', '1E']];
  for (const [a, b] of cases) {
    for (const [x, y] of [[a, b], [b, a]]) {
      assert.equal(compareQuick(parseQuantity(x), parseQuantity(y)), compare(parseQuantity(x), parseQuantity(y)), `${x} vs ${y}`);
    }
  }
});
