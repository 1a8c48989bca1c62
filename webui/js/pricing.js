// How the catalog prices plans, from its /ui-config.json (the currency and
// cost unit its OSB catalog publishes), and costs written with them:
// "1.5 USD per hour", "Free" for zero.

import { parseDecimal } from './quantity.js';

const UNIT_WORDS = {
  HOURLY: 'per hour', DAILY: 'per day', WEEKLY: 'per week', MONTHLY: 'per month', YEARLY: 'per year', ANNUALLY: 'per year',
  HOUR: 'per hour', DAY: 'per day', MONTH: 'per month', YEAR: 'per year',
};

export const uiConfig = { currency: 'usd', costUnit: 'HOURLY', oidc: null, loaded: false };

/** Read /ui-config.json once; on failure the defaults stay (and costs still show). */
export async function loadUiConfig() {
  try {
    const response = await fetch('/ui-config.json', { headers: { Accept: 'application/json' }, cache: 'no-store' });
    if (response.ok) Object.assign(uiConfig, await response.json(), { loaded: true });
  } catch {
    // offline: defaults
  }
}

/** "per hour" for HOURLY; an unknown unit is shown as written, lower-cased. */
export function periodText() {
  const unit = String(uiConfig.costUnit ?? '').toUpperCase();
  return UNIT_WORDS[unit] ?? (unit ? `per ${unit.toLowerCase()}` : '');
}

/** A plan cost with currency and period, "Free" for zero, "—" when missing. */
export function formatCost(cost) {
  const text = String(cost ?? '').trim();
  if (text === '') return '—';
  let value;
  try {
    value = parseDecimal(text);
  } catch {
    return text;
  }
  if (value.coef === 0n) return 'Free';
  const currency = String(uiConfig.currency ?? '').toUpperCase();
  return [text, currency, periodText()].filter(Boolean).join(' ');
}

/**
 * A contract's cost in the unit the catalog served with it (`pricing`:
 * {currency, per}): "1.5 EUR/hour". Without pricing (an older catalog),
 * the catalog-wide form of formatCost.
 */
export function formatPricedCost(cost, pricing) {
  const currency = typeof pricing?.currency === 'string' ? pricing.currency : '';
  const per = typeof pricing?.per === 'string' ? pricing.per : '';
  if (!currency || !per) return formatCost(cost);
  const text = String(cost ?? '').trim();
  if (text === '') return '—';
  return `${text} ${currency}/${per}`;
}

/** Who bought a contract, when the market autoscaler did (its boughtBy is `market-autoscaler/<namespace>/<name>`). */
export function boughtByAutoscaler(boughtBy) {
  return typeof boughtBy === 'string' && boughtBy.startsWith('market-autoscaler/');
}
