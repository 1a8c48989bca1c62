// Costs in the unit the catalog serves with them, and the autoscaler's mark.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { boughtByAutoscaler, formatPricedCost } from '../../../webui/js/pricing.js';

test('a contract cost carries its own currency and period', () => {
  assert.equal(formatPricedCost('1.5', { currency: 'EUR', per: 'hour' }), '1.5 EUR/hour');
  assert.equal(formatPricedCost('0.25', { currency: 'USD', per: 'month' }), '0.25 USD/month');
  assert.equal(formatPricedCost('', { currency: 'EUR', per: 'hour' }), '—');
  // An older catalog says no unit: the catalog-wide form (defaults here).
  assert.equal(formatPricedCost('1.5', undefined), '1.5 USD per hour');
  assert.equal(formatPricedCost('1.5', { currency: 7, per: 'hour' }), '1.5 USD per hour');
});

test('only market-autoscaler/… is the autoscaler', () => {
  assert.equal(boughtByAutoscaler('market-autoscaler/team-a/web'), true);
  assert.equal(boughtByAutoscaler('ops'), false);
  assert.equal(boughtByAutoscaler(' market-autoscaler/x'), false);
  assert.equal(boughtByAutoscaler(undefined), false);
});
