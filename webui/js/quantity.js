// Kubernetes resource quantities ("500m", "4Gi", "1e3") parsed to exact
// values, for the consumer view's client-side filters. The grammar and
// suffixes are those of Kubernetes' resource.Quantity; values are kept as an
// exact decimal (BigInt coefficient × 10^exponent) so "1Gi" vs "1073741824"
// or "0.1" vs "100m" compare exactly, with no floating-point rounding.
//
// The server stays authoritative for validating what providers publish;
// this module only decides what the consumer's filters hide.

const BINARY_SUFFIXES = { Ki: 10n, Mi: 20n, Gi: 30n, Ti: 40n, Pi: 50n, Ei: 60n };
const DECIMAL_SUFFIXES = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

// <sign><digits>[.<digits>]<suffix>, where the suffix is a binary SI suffix, an
// e/E exponent, or a decimal SI suffix. The exponent alternative comes before
// the single letters so "1E3" is 1000 (exponent) while "1E" is one exa.
const QUANTITY_RE = /^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE])?$/;
const DECIMAL_RE = /^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$/;

// Far beyond any real resource, small enough that exact BigInt arithmetic stays cheap.
const MAX_EXPONENT = 1000;

export class QuantityError extends Error {
  constructor(message) {
    super(message);
    this.name = 'QuantityError';
  }
}

/** An exact decimal: coef × 10^exp. */
function decimal(negative, digits, exp) {
  const [whole, frac = ''] = digits.split('.');
  let coef = BigInt((whole || '0') + frac);
  if (negative) coef = -coef;
  return { coef, exp: exp - frac.length };
}

function checkExponent(exp, text) {
  if (!Number.isSafeInteger(exp) || Math.abs(exp) > MAX_EXPONENT) {
    throw new QuantityError(`"${text}" is out of range`);
  }
}

/**
 * Parse a Kubernetes quantity. Returns an exact decimal { coef, exp }.
 * Throws QuantityError naming what is wrong.
 */
export function parseQuantity(text) {
  if (typeof text === 'number') text = String(text);
  if (typeof text !== 'string' || text.length === 0) {
    throw new QuantityError('quantity is empty');
  }
  const match = QUANTITY_RE.exec(text);
  if (!match) {
    throw new QuantityError(`"${text}" is not a Kubernetes quantity (examples: 2, 500m, 4Gi, 100G, 1e3)`);
  }
  const [, sign, digits, suffix = ''] = match;
  if (suffix in BINARY_SUFFIXES) {
    const value = decimal(sign === '-', digits, 0);
    return { coef: value.coef * (1n << BINARY_SUFFIXES[suffix]), exp: value.exp };
  }
  // A lone "E" is the exa suffix; "e"/"E" followed by digits is an exponent.
  const exp = suffix.length > 1 && (suffix[0] === 'e' || suffix[0] === 'E')
    ? Number(suffix.slice(1))
    : DECIMAL_SUFFIXES[suffix];
  checkExponent(exp, text);
  return decimal(sign === '-', digits, exp);
}

/** Parse a plain decimal number such as a cost ("1.0", "0.25", 3, "1e-3"). */
export function parseDecimal(text) {
  if (typeof text === 'number') {
    if (!Number.isFinite(text)) throw new QuantityError(`${text} is not a number`);
    text = String(text);
  }
  if (typeof text !== 'string' || text.length === 0) {
    throw new QuantityError('number is empty');
  }
  const match = DECIMAL_RE.exec(text);
  if (!match) throw new QuantityError(`"${text}" is not a number`);
  const [, sign, digits, exponent] = match;
  const exp = exponent ? Number(exponent.slice(1)) : 0;
  checkExponent(exp, text);
  return decimal(sign === '-', digits, exp);
}

/** Compare two exact decimals: -1, 0 or 1. */
export function compare(a, b) {
  let x = a.coef;
  let y = b.coef;
  if (a.exp > b.exp) x *= 10n ** BigInt(a.exp - b.exp);
  else if (b.exp > a.exp) y *= 10n ** BigInt(b.exp - a.exp);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** a + b, exact. */
export function add(a, b) {
  const exp = Math.min(a.exp, b.exp);
  return {
    coef: a.coef * 10n ** BigInt(a.exp - exp) + b.coef * 10n ** BigInt(b.exp - exp),
    exp,
  };
}

export const ZERO = Object.freeze({ coef: 0n, exp: 0 });

export function isNegative(value) {
  return value.coef < 0n;
}

/** The exact value as a plain decimal string ("1073741824", "0.5"), for tooltips and tests. */
export function toPlainString(value) {
  const negative = value.coef < 0n;
  let digits = (negative ? -value.coef : value.coef).toString();
  let out;
  if (value.exp >= 0) {
    out = digits === '0' ? '0' : digits + '0'.repeat(value.exp);
  } else {
    const places = -value.exp;
    digits = digits.padStart(places + 1, '0');
    const whole = digits.slice(0, digits.length - places);
    const frac = digits.slice(digits.length - places).replace(/0+$/, '');
    out = frac ? `${whole}.${frac}` : whole;
  }
  return negative && out !== '0' ? `-${out}` : out;
}

// Unit spellings people write for the Kubernetes suffixes, lower-cased.
const UNIT_GUESSES = {
  k: ['k', 'Ki'], kb: ['k', 'Ki'], kib: ['Ki'], ki: ['Ki'],
  mb: ['M', 'Mi'], mib: ['Mi'], mi: ['Mi'],
  g: ['G', 'Gi'], gb: ['G', 'Gi'], gib: ['Gi'], gi: ['Gi'],
  t: ['T', 'Ti'], tb: ['T', 'Ti'], tib: ['Ti'], ti: ['Ti'],
  p: ['P', 'Pi'], pb: ['P', 'Pi'], pib: ['Pi'], pi: ['Pi'],
  e: ['E', 'Ei'], eb: ['E', 'Ei'], eib: ['Ei'], ei: ['Ei'],
  m: ['m', 'M', 'Mi'], b: [''], bytes: [''], byte: [''],
  cpu: [''], cpus: [''], core: [''], cores: [''], millicores: ['m'], millicpu: ['m'],
};

/** Quantities `text` probably meant ("5GB" → ["5G", "5Gi"]); empty when there is no good guess. */
export function quantityCandidates(text) {
  const raw = String(text);
  const compact = raw.replace(/\s+/g, '').replace(',', '.');
  const m = /^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([A-Za-z]*)$/.exec(compact);
  if (!m) return [];
  const [, number, unit] = m;
  const guesses = unit === '' ? [''] : UNIT_GUESSES[unit.toLowerCase()];
  return (guesses ?? []).map((suffix) => `${number}${suffix}`)
    .filter((candidate) => candidate !== raw && QUANTITY_RE.test(candidate));
}

function orList(items) {
  return items.length === 1 ? items[0] : `${items.slice(0, -1).join(', ')} or ${items[items.length - 1]}`;
}

/**
 * Why `text` is not a quantity, in plain words, with what was probably
 * meant: "5GB is not a Kubernetes quantity — did you mean 5G or 5Gi?".
 */
export function suggestQuantity(text) {
  const base = `${text} is not a Kubernetes quantity`;
  const candidates = quantityCandidates(text);
  if (candidates.length > 0) return `${base} — did you mean ${orList(candidates)}?`;
  return `${base}. Write a number with an optional unit, e.g. 2, 500m, 4Gi or 100G.`;
}

/** The same, short enough for a narrow filter field: "did you mean 5G or 5Gi?". */
export function shortQuantityProblem(text) {
  const candidates = quantityCandidates(text);
  return candidates.length > 0 ? `Try ${orList(candidates)}` : 'Not a quantity (e.g. 4Gi)';
}

/** The value as a float, kept on the value (exact decimals are never mutated otherwise). */
function approx(value) {
  if (value.approx === undefined) {
    const n = Number(value.coef) * 10 ** value.exp;
    if (Object.isFrozen(value)) return n;
    value.approx = n;
  }
  return value.approx;
}

/**
 * compare(a, b), answered from floats when they are clearly apart and
 * exactly otherwise: the same result, without BigInt arithmetic for almost
 * every comparison a filter makes over thousands of plans.
 */
export function compareQuick(a, b) {
  const x = approx(a);
  const y = approx(b);
  const scale = Math.max(Math.abs(x), Math.abs(y));
  if (Number.isFinite(scale) && Math.abs(x - y) > scale * 1e-9) return x < y ? -1 : 1;
  return compare(a, b);
}
