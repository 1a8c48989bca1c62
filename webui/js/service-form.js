// A service plan's parameters as a form: the fields made from the JSON
// Schema a plan declares (`schemas.service_instance.create.parameters`, or
// the binding's), the values read back as the `parameters` object with
// every problem in plain words, and the field a broker's 400 names
// (`parameters.size: want integer, but got string`). What the form cannot
// show as a plain control (a nested object, `oneOf`, a list, a type union)
// falls back to a JSON textarea checked as JSON; the catalog checks the
// whole schema again. Pure (no DOM), so node tests it.

/** Keywords a plain control honours (or that only annotate); any other makes the property a JSON field. */
const PLAIN_KEYWORDS = new Set([
  'type', 'title', 'description', 'default', 'enum', 'const', 'examples', '$comment', 'format',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
  'minLength', 'maxLength', 'pattern', 'readOnly', 'writeOnly', 'deprecated',
]);

/** Keywords of the top-level object the form understands; any other makes the whole form one JSON field. */
const OBJECT_KEYWORDS = new Set([
  '$schema', '$id', 'id', '$comment', 'title', 'description', 'type', 'properties', 'required',
  'additionalProperties', 'default', 'examples', 'definitions', '$defs',
]);

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The kind of control a property gets: enum, string, integer, number, boolean, or json. */
function kindOf(schema) {
  if (!isObject(schema)) return 'json';
  if (Object.keys(schema).some((k) => !PLAIN_KEYWORDS.has(k))) return 'json';
  if (Array.isArray(schema.enum)) {
    return schema.enum.length > 0 && schema.enum.every((v) => v === null || ['string', 'number', 'boolean'].includes(typeof v)) ? 'enum' : 'json';
  }
  if ('const' in schema) return 'json';
  return ['string', 'integer', 'number', 'boolean'].includes(schema.type) ? schema.type : 'json';
}

/** Draft-04 spells an exclusive bound as a boolean beside minimum/maximum; later drafts as a number. */
function bounds(schema) {
  const low = typeof schema.exclusiveMinimum === 'number' ? { value: schema.exclusiveMinimum, open: true }
    : typeof schema.minimum === 'number' ? { value: schema.minimum, open: schema.exclusiveMinimum === true } : null;
  const high = typeof schema.exclusiveMaximum === 'number' ? { value: schema.exclusiveMaximum, open: true }
    : typeof schema.maximum === 'number' ? { value: schema.maximum, open: schema.exclusiveMaximum === true } : null;
  return { low, high };
}

/** What a field accepts, in words (its hint, after the schema's description). */
export function constraintWords(field) {
  const { schema, kind } = field;
  const words = [];
  if (kind === 'integer' || kind === 'number') {
    words.push(kind === 'integer' ? 'A whole number' : 'A number');
    const { low, high } = bounds(schema);
    if (low) words.push(low.open ? `above ${low.value}` : `at least ${low.value}`);
    if (high) words.push(high.open ? `below ${high.value}` : `at most ${high.value}`);
    if (typeof schema.multipleOf === 'number') words.push(`a multiple of ${schema.multipleOf}`);
  } else if (kind === 'string') {
    if (Number.isInteger(schema.minLength) && schema.minLength > 0) words.push(`at least ${schema.minLength} character${schema.minLength === 1 ? '' : 's'}`);
    if (Number.isInteger(schema.maxLength)) words.push(`at most ${schema.maxLength} characters`);
    if (typeof schema.pattern === 'string') words.push(`matching ${schema.pattern}`);
  } else if (kind === 'json') {
    words.push('JSON');
  }
  if (!words.length) return '';
  const text = words.join(', ');
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}.`;
}

/**
 * The form for `schema`: `{ whole, fields }`. `whole` is true when the
 * schema is not a plain object of properties: then `fields` is one JSON
 * field for all the parameters (name ''). Otherwise one field per
 * property, in the schema's order: `{ name, label, kind, required, schema,
 * options?, initial, hint }` — `options` the enum's values, `initial` what
 * the control starts with (the schema's `default`, as the control shows it).
 * `skip` leaves out properties the page asks for itself.
 */
export function formFields(schema, { skip = [] } = {}) {
  if (schema === undefined || schema === null) return { whole: false, fields: [] };
  const plain = isObject(schema)
    && (schema.type === undefined || schema.type === 'object')
    && Object.keys(schema).every((k) => OBJECT_KEYWORDS.has(k))
    && (schema.properties === undefined || isObject(schema.properties))
    && (schema.required === undefined || Array.isArray(schema.required));
  if (!plain) {
    return {
      whole: true,
      fields: [{ name: '', label: 'Parameters (JSON)', kind: 'json', required: true, schema: isObject(schema) ? schema : {}, initial: '{}', hint: 'This plan\'s parameters do not fit a simple form: write them as a JSON object.' }],
    };
  }
  const required = new Set(schema.required ?? []);
  const fields = Object.entries(schema.properties ?? {})
    .filter(([name]) => !skip.includes(name))
    .map(([name, property]) => {
      const kind = kindOf(property);
      const field = {
        name,
        label: (isObject(property) && typeof property.title === 'string' && property.title.trim()) || name,
        kind,
        required: required.has(name),
        schema: isObject(property) ? property : {},
      };
      if (kind === 'enum') field.options = property.enum;
      const fallback = kind === 'boolean' ? false : '';
      const def = field.schema.default;
      if (def === undefined) field.initial = fallback;
      else if (kind === 'enum') field.initial = property.enum.findIndex((v) => v === def);
      else if (kind === 'json') field.initial = JSON.stringify(def, null, 2);
      else if (kind === 'boolean') field.initial = def === true;
      else field.initial = String(def);
      if (kind === 'enum' && field.initial === -1) field.initial = '';
      const description = typeof field.schema.description === 'string' ? field.schema.description.trim() : '';
      field.hint = [description, constraintWords(field)].filter(Boolean).join(' ');
      return field;
    });
  // A required property the schema does not describe still needs a value.
  for (const name of required) {
    if (!skip.includes(name) && !fields.some((f) => f.name === name)) {
      fields.push({ name, label: name, kind: 'json', required: true, schema: {}, initial: '', hint: 'Required by the plan. JSON.' });
    }
  }
  return { whole: false, fields };
}

const INTEGER = /^[+-]?[0-9]+$/;
const NUMBER = /^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$/;

function checkNumber(field, text) {
  const { schema, kind } = field;
  if (kind === 'integer' && !INTEGER.test(text)) return { error: `A whole number, such as ${bounds(schema).low?.value ?? 1}` };
  if (kind === 'number' && !NUMBER.test(text)) return { error: 'A number, such as 1.5' };
  const value = Number(text);
  if (kind === 'integer' && !Number.isSafeInteger(value)) return { error: 'Too large a number' };
  if (!Number.isFinite(value)) return { error: 'Too large a number' };
  const { low, high } = bounds(schema);
  if (low && (low.open ? value <= low.value : value < low.value)) return { error: low.open ? `Must be above ${low.value}` : `At least ${low.value}` };
  if (high && (high.open ? value >= high.value : value > high.value)) return { error: high.open ? `Must be below ${high.value}` : `At most ${high.value}` };
  if (typeof schema.multipleOf === 'number' && schema.multipleOf > 0) {
    const ratio = value / schema.multipleOf;
    if (Math.abs(ratio - Math.round(ratio)) > 1e-9) return { error: `Must be a multiple of ${schema.multipleOf}` };
  }
  return { value };
}

function checkString(field, text) {
  const { schema } = field;
  // JSON Schema counts characters (code points), not UTF-16 units.
  const length = [...text].length;
  if (Number.isInteger(schema.minLength) && length < schema.minLength) return { error: `At least ${schema.minLength} character${schema.minLength === 1 ? '' : 's'} (this has ${length})` };
  if (Number.isInteger(schema.maxLength) && length > schema.maxLength) return { error: `At most ${schema.maxLength} characters (this has ${length})` };
  if (typeof schema.pattern === 'string') {
    let pattern = null;
    try {
      pattern = new RegExp(schema.pattern, 'u');
    } catch {
      // A pattern JavaScript cannot read: the catalog checks it.
    }
    if (pattern && !pattern.test(text)) return { error: `Must match the pattern ${schema.pattern}` };
  }
  return { value: text };
}

function checkJson(field, text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { error: `Not valid JSON: ${err.message}` };
  }
  if (field.name === '' && !isObject(value)) return { error: 'Must be a JSON object, such as {"size": 1}' };
  return { value };
}

/**
 * Read the form back. `values` maps a field's name to what its control
 * holds (text; `true`/`false` for a boolean; the option's index, or '' for
 * none, for an enum). Returns `{ parameters }` or `{ errors }` (field name →
 * words), every problem at once.
 */
export function readParameters(form, values) {
  const parameters = {};
  const errors = {};
  for (const field of form.fields) {
    const raw = values[field.name];
    if (field.kind === 'boolean') {
      parameters[field.name] = raw === true;
      continue;
    }
    if (field.kind === 'enum') {
      if (raw === '' || raw === undefined || raw === null) {
        if (field.required) errors[field.name] = 'Required: choose one';
        continue;
      }
      parameters[field.name] = field.options[Number(raw)];
      continue;
    }
    const text = field.kind === 'string' ? String(raw ?? '') : String(raw ?? '').trim();
    if (text === '') {
      if (field.required) errors[field.name] = 'Required';
      continue;
    }
    const checked = field.kind === 'string' ? checkString(field, text)
      : field.kind === 'json' ? checkJson(field, text)
        : checkNumber(field, text);
    if (checked.error) errors[field.name] = checked.error;
    else if (field.name === '') Object.assign(parameters, checked.value);
    else parameters[field.name] = checked.value;
  }
  return Object.keys(errors).length ? { errors } : { parameters };
}

/**
 * The field a broker's error description names, and its words: `{ field,
 * words }` — `field` one of `names` (a parameter's name, or a name the page
 * gives a field of its own such as `context.peering.kubeconfig`), or null
 * when the description names none of them. A nested parameter
 * (`parameters.db.size`) belongs to its top-level field; a missing required
 * parameter (`parameters: missing properties 'size'`) to the field it names.
 */
export function serverFieldError(description, names) {
  const text = String(description ?? '');
  const known = new Set(names);
  const match = /^([A-Za-z0-9_.$/\-[\]]+)\s*:\s*([\s\S]*)$/.exec(text);
  if (!match) return { field: null, words: text };
  const [, path, words] = match;
  if (known.has(path)) return { field: path, words };
  if (path === 'parameters' || path.startsWith('parameters.')) {
    const top = path.slice('parameters.'.length).split('.')[0];
    if (path !== 'parameters' && known.has(top)) return { field: top, words };
    const missing = /missing propert(?:y|ies) (.+)/.exec(words);
    if (missing) {
      const named = [...missing[1].matchAll(/'([^']+)'|"([^"]+)"/g)].map((m) => m[1] ?? m[2]);
      const found = named.find((n) => known.has(n));
      if (found) return { field: found, words: `Required (${words})` };
    }
    if (known.has('')) return { field: '', words: text };
  }
  return { field: null, words: text };
}

/** A DNS-1123 label (a namespace's name), or why not. */
export function dnsLabelProblem(text) {
  if (text === '') return 'Required';
  if (text.length > 63) return `At most 63 characters (this has ${text.length})`;
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(text)) return 'Lower-case letters, digits and hyphens, starting and ending with a letter or digit (a Kubernetes namespace name)';
  return null;
}

/** A DNS-1123 subdomain (a Secret's name), or why not. */
export function dnsSubdomainProblem(text) {
  if (text === '') return 'Required';
  if (text.length > 253) return `At most 253 characters (this has ${text.length})`;
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(text)) return 'Lower-case letters, digits, hyphens and dots, starting and ending with a letter or digit (a Kubernetes Secret name)';
  return null;
}

/** The catalog's limit on a peering kubeconfig (catalog/src/providers/kubeconfig.rs). */
export const MAX_KUBECONFIG_BYTES = 32 * 1024;

/** The customer's peering-user kubeconfig, or why it cannot be one (the catalog checks its shape). */
export function kubeconfigProblem(text) {
  if (String(text ?? '').trim() === '') return 'Required: the kubeconfig `liqoctl generate peering-user` printed for this provider';
  const bytes = new TextEncoder().encode(text).length;
  if (bytes > MAX_KUBECONFIG_BYTES) return `At most 32 KiB (this has ${Math.ceil(bytes / 1024)} KiB): is this the peering user's kubeconfig?`;
  return null;
}
