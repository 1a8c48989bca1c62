// An offer as a file: the body of POST /offer/{id} plus its id, written as
// JSON or YAML and read back from either. The YAML side handles what an
// offer needs — nested block mappings of plain or quoted scalars, `#`
// comments — and says plainly what it does not (lists, anchors, multi-line
// strings), naming the line.

/** Write `value` (objects of strings) as YAML. */
export function toYaml(value, indent = '') {
  const lines = [];
  for (const [key, item] of Object.entries(value)) {
    if (item && typeof item === 'object') {
      if (Object.keys(item).length === 0) lines.push(`${indent}${scalar(key)}: {}`);
      else lines.push(`${indent}${scalar(key)}:`, toYaml(item, `${indent}  `));
    } else {
      lines.push(`${indent}${scalar(key)}: ${scalar(String(item ?? ''))}`);
    }
  }
  return lines.join('\n');
}

function scalar(text) {
  // Plain when YAML reads it back as the same string; else double-quoted (JSON escapes are valid YAML).
  const plain = /^[A-Za-z0-9_./-][A-Za-z0-9 _./:()-]*$/.test(text) && !/[ :]$/.test(text) && !/: /.test(text)
    && !/^(true|false|null|yes|no|on|off|~|[-+]?[0-9.]+([eE][-+]?[0-9]+)?)$/i.test(text);
  return plain ? text : JSON.stringify(text);
}

export class OfferFileError extends Error {}

/** Read YAML (the subset above) into nested objects of strings. */
export function fromYaml(text) {
  const root = {};
  const stack = [{ indent: -1, node: root }];
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  lines.forEach((raw, index) => {
    const line = stripComment(raw);
    if (!line.trim() || line.trim() === '---') return;
    const where = `line ${index + 1}`;
    if (/^\t/.test(line)) throw new OfferFileError(`${where}: indent with spaces, not tabs.`);
    const indent = line.length - line.trimStart().length;
    const body = line.trim();
    if (body.startsWith('- ')) throw new OfferFileError(`${where}: lists are not part of an offer; write plans as a mapping keyed by plan ID.`);
    const m = /^("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^:"']+?):(?:\s+(.*))?$/.exec(body);
    if (!m) throw new OfferFileError(`${where}: expected “key: value”.`);
    const key = unquote(m[1], where);
    while (stack.length > 1 && indent <= stack[stack.length - 1].indent) stack.pop();
    const parent = stack[stack.length - 1].node;
    if (Object.hasOwn(parent, key)) throw new OfferFileError(`${where}: “${key}” appears twice.`);
    const rest = m[2]?.trim() ?? '';
    if (rest === '' ) {
      const child = {};
      parent[key] = child;
      stack.push({ indent, node: child });
    } else if (rest === '{}') {
      parent[key] = {};
    } else if (/^[|>&*!]/.test(rest) || rest.startsWith('[') || rest.startsWith('{')) {
      throw new OfferFileError(`${where}: write “${key}” as a plain or quoted one-line value.`);
    } else {
      parent[key] = unquote(rest, where);
    }
  });
  return root;
}

function stripComment(line) {
  let quote = null;
  for (let i = 0; i < line.length; i += 1) {
    const c = line[i];
    if (quote) {
      if (c === '\\' && quote === '"') i += 1;
      else if (c === quote) quote = null;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]))) return line.slice(0, i);
  }
  return line;
}

function unquote(text, where) {
  if (text.startsWith('"')) {
    try {
      return JSON.parse(text);
    } catch {
      throw new OfferFileError(`${where}: a double-quoted value is not closed properly.`);
    }
  }
  if (text.startsWith("'")) {
    if (!text.endsWith("'") || text.length < 2) throw new OfferFileError(`${where}: a single-quoted value is not closed.`);
    return text.slice(1, -1).replace(/''/g, "'");
  }
  return text.trim();
}

/** The form state (as the editor reads it) as an offer document. */
export function offerDocument(form) {
  const plans = {};
  for (const plan of form.plans) {
    const resources = {};
    for (const row of plan.rows) if (row.name) resources[row.name] = row.value;
    plans[plan.key] = { name: plan.name || plan.key, cost: plan.cost, resources };
  }
  return { id: form.id, name: form.name, type: form.type, description: form.description, plans };
}

/**
 * Read an offer document (JSON or YAML) into the editor's form state.
 * Throws OfferFileError saying what is wrong.
 */
export function readOfferFile(text) {
  const trimmed = text.trim();
  let doc;
  if (trimmed.startsWith('{')) {
    try {
      doc = JSON.parse(trimmed);
    } catch (err) {
      throw new OfferFileError(`This JSON cannot be read: ${err.message}`);
    }
  } else {
    doc = fromYaml(text);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new OfferFileError('The file holds no offer.');
  const str = (v) => (v === undefined || v === null ? '' : String(v));
  const plansIn = doc.plans && typeof doc.plans === 'object' && !Array.isArray(doc.plans) ? doc.plans : null;
  if (!plansIn) throw new OfferFileError('The offer has no “plans” mapping (plan ID → plan).');
  const plans = Object.entries(plansIn).map(([key, plan]) => {
    if (!plan || typeof plan !== 'object') throw new OfferFileError(`Plan “${key}” is not a mapping.`);
    const resources = plan.resources && typeof plan.resources === 'object' ? plan.resources : {};
    return {
      key,
      name: str(plan.name ?? plan.planName),
      cost: str(plan.cost),
      rows: Object.entries(resources).map(([name, value]) => ({ name, value: str(value) })),
    };
  });
  return { id: str(doc.id), name: str(doc.name), type: str(doc.type), description: str(doc.description), plans };
}
