// The offer editor's checks, run in the browser before anything is sent, so
// a provider sees every problem of the form at once and in plain words: ids
// (the catalog's id alphabet), required texts, costs (non-negative decimals,
// at most 9 fraction digits) and quantities (the UI's Kubernetes quantity
// parser). The catalog stays authoritative; `plainServerMessage` rewords
// what it still refuses.

import { isNegative, parseQuantity, suggestQuantity } from './quantity.js';

const ID_RE = /^[A-Za-z0-9._~-]{1,128}$/;
const COST_RE = /^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$/;
const MAX_NAME = 256;

/** Why `id` is not a valid offer or plan id (null when it is). */
export function idProblem(id, what) {
  if (!id) return `Enter ${what}.`;
  if (id === '.' || id === '..') return `“${id}” cannot be ${what}: use letters or digits too.`;
  if (id.length > 128) return `${capital(what)} is ${id.length} characters long; use at most 128.`;
  if (!ID_RE.test(id)) {
    const bad = [...new Set([...id].filter((c) => !/[A-Za-z0-9._~-]/.test(c)))].map((c) => (c === ' ' ? 'spaces' : `“${c}”`));
    return `${capital(what)} may hold only letters, digits and . _ ~ - (not ${bad.join(', ')}).`;
  }
  return null;
}

/** Why `cost` is not a valid plan cost (null when it is). */
export function costProblem(cost) {
  if (cost === '') return 'Enter a cost, e.g. 1.0 (0 for a free plan).';
  if (cost.startsWith('-')) return 'A cost cannot be negative.';
  if (!COST_RE.test(cost)) return `“${cost}” is not a number. Write the cost as digits with a decimal point, e.g. 1.5.`;
  const fraction = cost.split('.')[1] ?? '';
  if (fraction.length > 9) return `A cost may have at most 9 digits after the decimal point (this one has ${fraction.length}).`;
  return null;
}

/** Why `value` is not a valid resource quantity (null when it is). */
export function quantityProblem(value) {
  if (value === '') return 'Enter an amount, e.g. 2, 500m or 4Gi.';
  try {
    if (isNegative(parseQuantity(value))) return 'An amount cannot be negative.';
    return null;
  } catch {
    return suggestQuantity(value);
  }
}

function textProblem(value, what) {
  if (!value) return `Enter ${what}.`;
  if (value.length > MAX_NAME) return `${capital(what)} is too long: at most ${MAX_NAME} characters.`;
  return null;
}

function capital(text) {
  const t = text.replace(/^(a|an|the) /, '');
  return t.charAt(0).toUpperCase() + t.slice(1);
}

/**
 * Every problem of an offer form. `form` = { id, name, type, plans: [{ key,
 * name, cost, rows: [{ name, value }] }] } (trimmed texts). Returns a list of
 * { path, message } where path is "id", "name", "type", "plans",
 * "plans.<index>.key|cost|name", "plans.<index>.rows.<row>.name|value".
 */
export function offerProblems(form) {
  const problems = [];
  const add = (path, message) => { if (message) problems.push({ path, message }); };
  add('id', idProblem(form.id, 'an offer ID'));
  add('name', textProblem(form.name, 'a name'));
  add('type', textProblem(form.type, 'a type'));
  if (form.plans.length === 0) add('plans', 'Add at least one plan.');
  const keys = new Set();
  form.plans.forEach((plan, p) => {
    const base = `plans.${p}`;
    let keyProblem = idProblem(plan.key, 'a plan ID');
    if (!keyProblem && keys.has(plan.key)) keyProblem = `Another plan already has the ID “${plan.key}”. Plan IDs must be unique.`;
    keys.add(plan.key);
    add(`${base}.key`, keyProblem);
    if (plan.name.length > MAX_NAME) add(`${base}.name`, `The display name is too long: at most ${MAX_NAME} characters.`);
    add(`${base}.cost`, costProblem(plan.cost));
    const names = new Set();
    plan.rows.forEach((row, r) => {
      if (!row.name && !row.value) return; // an untouched row
      const rowBase = `${base}.rows.${r}`;
      if (!row.name) add(`${rowBase}.name`, 'Enter the resource’s name, e.g. cpu or memory.');
      else if (names.has(row.name)) add(`${rowBase}.name`, `This plan already lists “${row.name}”. Each resource may appear once per plan.`);
      names.add(row.name);
      add(`${rowBase}.value`, quantityProblem(row.value));
    });
  });
  return problems;
}

/**
 * A server message in plain words: "plans.small.resources.memory: quantities
 * must match …" becomes what the editor would have said about `value`.
 * `kind` is "quantity", "cost", "id" or null (unknown: the message as sent,
 * without its field path).
 */
export function plainServerMessage(message, kind, value) {
  if (kind === 'quantity' && value !== undefined) return quantityProblem(value) ?? stripPath(message);
  if (kind === 'cost' && value !== undefined) return costProblem(value) ?? stripPath(message);
  if (kind === 'id' && value !== undefined) return idProblem(value, 'an ID') ?? stripPath(message);
  return stripPath(message);
}

function stripPath(message) {
  const text = String(message ?? '');
  const m = /^[A-Za-z0-9_.\/~-]+: (.*)$/s.exec(text);
  const rest = m ? m[1] : text;
  return rest.charAt(0).toUpperCase() + rest.slice(1);
}
