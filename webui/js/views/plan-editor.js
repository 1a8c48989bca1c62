// The plan editor inside the offer form: a fieldset per plan (its id, display
// name and cost) holding editable resource rows (name + quantity). Plans and
// rows are added and removed with buttons; focus moves to what appeared or
// to the control that took the removed one's place.

import { h, srOnly, uid } from '../dom.js';
import { field } from '../fields.js';
import { WELL_KNOWN_RESOURCES } from '../model.js';
import { stampText } from '../plan-activity.js';

/** A fieldset-level error slot with the same interface as a field's. */
function groupError(group) {
  const error = h('p', { id: uid('group-error'), class: 'field-error', hidden: true });
  return {
    error,
    wrapper: group,
    control: group,
    setError(message) {
      error.textContent = message || '';
      error.hidden = !message;
      group.classList.toggle('has-error', Boolean(message));
      if (message) group.setAttribute('aria-describedby', error.id);
      else group.removeAttribute('aria-describedby');
    },
  };
}

export function createPlanEditor({ announce }) {
  const resourceList = h('datalist', { id: uid('resource-names') },
    WELL_KNOWN_RESOURCES.map((name) => h('option', { value: name })));
  const plansBox = h('div', { class: 'plans' });
  const addPlanButton = h('button', { type: 'button', class: 'button button--secondary', text: 'Add plan' });
  const section = h('fieldset', { class: 'plans-section' },
    h('legend', {}, h('span', { class: 'legend-title', text: 'Plans' })),
    h('p', { class: 'hint', text: 'Each plan is one size consumers can pick: a cost and the resources it provides. Quantities are Kubernetes quantities such as 500m, 2, 4Gi or 100G.' }),
    resourceList,
    plansBox,
    h('p', {}, addPlanButton));
  const sectionError = groupError(section);
  section.insertBefore(sectionError.error, plansBox);
  const plans = []; // plan records in display order

  function relabel() {
    plans.forEach((plan, index) => {
      const key = plan.key.control.value.trim();
      const title = key ? `Plan ${key}` : `Plan ${index + 1}`;
      plan.legend.textContent = title;
      plan.removeLabel.textContent = ` ${key || index + 1}`;
      plan.duplicateLabel.textContent = ` ${key || index + 1}`;
      plan.rows.forEach((row, rowIndex) => {
        const name = row.name.control.value.trim();
        row.removeLabel.textContent = ` resource ${name || rowIndex + 1} of ${title.toLowerCase()}`;
      });
    });
  }

  function addRow(plan, name = '', value = '', { focus = false } = {}) {
    const row = {
      name: field({ label: 'Resource', class: 'field--resource-name', attrs: { list: resourceList.id, autocomplete: 'off', spellcheck: 'false', 'data-role': 'resource-name' } }),
      value: field({ label: 'Quantity', class: 'field--quantity', attrs: { autocomplete: 'off', spellcheck: 'false', 'data-role': 'resource-quantity' } }),
      removeLabel: srOnly(''),
    };
    row.name.control.value = name;
    row.value.control.value = value;
    row.remove = h('button', { type: 'button', class: 'button button--icon', 'data-role': 'remove-resource' },
      h('span', { 'aria-hidden': 'true', text: '✕' }), h('span', { class: 'visually-hidden', text: 'Remove' }), row.removeLabel);
    row.element = h('li', { class: 'resource-row' }, row.name.wrapper, row.value.wrapper, row.remove);
    row.remove.addEventListener('click', () => {
      const index = plan.rows.indexOf(row);
      plan.rows.splice(index, 1);
      row.element.remove();
      relabel();
      const next = plan.rows[index] ?? plan.rows[index - 1];
      (next ? next.name.control : plan.addRow).focus();
      announce('Resource row removed.');
    });
    row.name.control.addEventListener('input', relabel);
    plan.rows.push(row);
    plan.rowList.append(row.element);
    relabel();
    if (focus) row.name.control.focus();
    return row;
  }

  function addPlan(initial = {}, { focus = false, after = null } = {}) {
    const plan = { rows: [], legend: h('span', { class: 'legend-title' }), removeLabel: srOnly('') };
    plan.key = field({ label: 'Plan ID', hint: 'Short and unique in this offer, e.g. basic', attrs: { autocomplete: 'off', spellcheck: 'false', 'data-role': 'plan-key' } });
    plan.name = field({ label: 'Display name', hint: 'What consumers see; defaults to the plan ID', attrs: { autocomplete: 'off', 'data-role': 'plan-name' } });
    plan.cost = field({ label: 'Cost', hint: 'A decimal, e.g. 1.0', attrs: { inputmode: 'decimal', autocomplete: 'off', spellcheck: 'false', 'data-role': 'plan-cost' } });
    plan.key.control.value = initial.key ?? '';
    plan.name.control.value = initial.name ?? '';
    plan.cost.control.value = initial.cost ?? '';
    plan.rowList = h('ul', { class: 'resource-rows' });
    plan.addRow = h('button', { type: 'button', class: 'button button--secondary button--small', 'data-role': 'add-resource' }, 'Add resource');
    plan.removeButton = h('button', { type: 'button', class: 'button button--danger button--small', 'data-role': 'remove-plan' }, 'Remove plan', plan.removeLabel);
    plan.duplicateLabel = srOnly('');
    plan.duplicateButton = h('button', { type: 'button', class: 'button button--secondary button--small', 'data-role': 'duplicate-plan' }, 'Duplicate plan', plan.duplicateLabel);
    const resourcesGroup = h('fieldset', { class: 'resources' },
      h('legend', { text: 'Resources' }),
      plan.rowList,
      h('p', {}, plan.addRow));
    plan.resources = groupError(resourcesGroup);
    resourcesGroup.insertBefore(plan.resources.error, plan.rowList);
    // What the catalog recorded about this plan's last change ("updated by the agent 3 min ago").
    const stamp = stampText(initial.stamp);
    plan.element = h('fieldset', { class: 'plan', 'data-role': 'plan' },
      h('legend', {}, plan.legend),
      stamp ? h('p', { class: 'plan__stamp muted', 'data-role': 'plan-stamp', 'data-by': stamp.by ?? '' },
        h('time', { datetime: initial.stamp.updatedAt, title: stamp.title, text: `${stamp.text.charAt(0).toUpperCase()}${stamp.text.slice(1)}` })) : null,
      h('div', { class: 'plan__fields' }, plan.key.wrapper, plan.name.wrapper, plan.cost.wrapper),
      resourcesGroup,
      h('p', { class: 'plan__remove' }, plan.duplicateButton, ' ', plan.removeButton));
    plan.group = groupError(plan.element);
    plan.element.insertBefore(plan.group.error, plan.element.children[1]);
    plan.key.control.addEventListener('input', relabel);
    plan.addRow.addEventListener('click', () => addRow(plan, '', '', { focus: true }));
    plan.duplicateButton.addEventListener('click', () => {
      const key = plan.key.control.value.trim() || 'plan';
      const taken = new Set(plans.map((p) => p.key.control.value.trim()));
      let copyKey = `${key}-copy`;
      for (let n = 2; taken.has(copyKey); n += 1) copyKey = `${key}-copy-${n}`;
      const copy = addPlan({
        key: copyKey,
        name: plan.name.control.value.trim() ? `${plan.name.control.value.trim()} (copy)` : '',
        cost: plan.cost.control.value,
        resources: plan.rows.map((row) => [row.name.control.value, row.value.control.value]),
      }, { after: plan });
      copy.key.control.focus();
      copy.key.control.select();
      announce(`Plan duplicated as ${copyKey}.`);
    });
    plan.removeButton.addEventListener('click', () => {
      const index = plans.indexOf(plan);
      plans.splice(index, 1);
      plan.element.remove();
      relabel();
      const next = plans[index] ?? plans[index - 1];
      (next ? next.key.control : addPlanButton).focus();
      announce('Plan removed.');
    });
    if (after) {
      plans.splice(plans.indexOf(after) + 1, 0, plan);
      after.element.after(plan.element);
    } else {
      plans.push(plan);
      plansBox.append(plan.element);
    }
    for (const [name, value] of initial.resources ?? []) addRow(plan, name, value);
    relabel();
    if (focus) plan.key.control.focus();
    return plan;
  }

  addPlanButton.addEventListener('click', () => {
    addPlan({ resources: [['cpu', ''], ['memory', ''], ['storage', '']] }, { focus: true });
    announce('Plan added.');
  });

  /** The plans as typed (trimmed): [{ key, name, cost, rows: [{ name, value }] }], in display order. */
  function read() {
    return plans.map((plan) => ({
      key: plan.key.control.value.trim(),
      name: plan.name.control.value.trim(),
      cost: plan.cost.control.value.trim(),
      rows: plan.rows.map((row) => ({ name: row.name.control.value.trim(), value: row.value.control.value.trim() })),
    }));
  }

  /**
   * The field showing a path of `offerProblems` ("plans", "plans.0.cost",
   * "plans.1.rows.2.value") or of the server's messages ("plans.basic.cost",
   * "plans.basic.resources.memory"), with what kind of value it holds; null
   * when no field shows it.
   */
  function fieldAt(path) {
    if (path === 'plans') return { field: sectionError, kind: null };
    let m = /^plans\.(\d+)\.(key|name|cost)$/.exec(path);
    if (m) {
      const plan = plans[Number(m[1])];
      return plan ? { field: plan[m[2]], kind: m[2] === 'cost' ? 'cost' : m[2] === 'key' ? 'id' : null } : null;
    }
    m = /^plans\.(\d+)\.rows\.(\d+)\.(name|value)$/.exec(path);
    if (m) {
      const row = plans[Number(m[1])]?.rows[Number(m[2])];
      return row ? { field: row[m[3]], kind: m[3] === 'value' ? 'quantity' : null } : null;
    }
    return null;
  }

  /** Server field paths ("plans.basic.resources.memory") mapped to the fields that show them. */
  function serverPaths() {
    const paths = new Map([['plans', { field: sectionError, kind: null }]]);
    for (const plan of plans) {
      const key = plan.key.control.value.trim();
      if (!key) continue;
      const base = `plans.${key}`;
      // The server names a plan by its key when the key itself is bad ("plans.a b: must be …").
      paths.set(base, { field: plan.key, kind: 'id' });
      paths.set(`${base}.name`, { field: plan.name, kind: null });
      paths.set(`${base}.planName`, { field: plan.name, kind: null });
      paths.set(`${base}.planID`, { field: plan.key, kind: 'id' });
      paths.set(`${base}.cost`, { field: plan.cost, kind: 'cost' });
      paths.set(`${base}.resources`, { field: plan.resources, kind: null });
      for (const row of plan.rows) {
        const name = row.name.control.value.trim();
        if (name) paths.set(`${base}.resources.${name}`, { field: row.value, kind: 'quantity' });
      }
    }
    return paths;
  }

  /** The plans as the catalog's JSON map (call once `offerProblems` found nothing). */
  function body() {
    const out = {};
    for (const plan of read()) {
      const resources = {};
      for (const row of plan.rows) if (row.name || row.value) resources[row.name] = row.value;
      out[plan.key] = { name: plan.name || plan.key, cost: plan.cost, resources };
    }
    return out;
  }

  /** Replace every plan with `list` ([{ key, name, cost, resources: [[name, value]], stamp? }]). */
  function reset(list) {
    for (const plan of plans) plan.element.remove();
    plans.length = 0;
    for (const plan of list) addPlan(plan);
  }

  function clearErrors() {
    sectionError.setError('');
    for (const plan of plans) {
      plan.group.setError('');
      plan.resources.setError('');
      for (const f of [plan.key, plan.name, plan.cost]) f.setError('');
      for (const row of plan.rows) {
        row.name.setError('');
        row.value.setError('');
      }
    }
  }

  return { element: section, addPlan, read, fieldAt, serverPaths, body, reset, clearErrors };
}
