// Tiny DOM helpers: build elements declaratively without innerHTML, so text
// from the catalog (offer names, descriptions, server messages) can never be
// interpreted as markup.

let idCounter = 0;

/** A document-unique id with a readable prefix (offer ids are free-form, so never derive ids from them). */
export function uid(prefix = 'id') {
  idCounter += 1;
  return `${prefix}-${idCounter}`;
}

/**
 * h('button', { class: 'x', type: 'button', onclick: fn, 'aria-label': '…' }, 'text', child)
 * Keys starting with "on" become listeners; `class`, `text`, `hidden`, `value`,
 * `checked`, `disabled` are set as properties; anything else is an attribute
 * (null/undefined/false skip it).
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'class') {
      el.className = value;
    } else if (key === 'text') {
      el.textContent = value;
    } else if (key === 'value' || key === 'checked' || key === 'disabled' || key === 'hidden') {
      el[key] = value;
    } else if (key === 'dataset') {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

/** Append children (nodes, strings, numbers, nested arrays; null/false skipped). */
export function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return parent;
}

/** Replace all children of `parent`. */
export function replaceChildren(parent, ...children) {
  parent.replaceChildren();
  return append(parent, children);
}

/** Text that only screen readers announce (e.g. the offer name after "Edit"). */
export function srOnly(text) {
  return h('span', { class: 'visually-hidden', text });
}

/** A date and time like "22 Nov 2026, 15:04:05" (always with the date), from an ISO string or epoch. */
export function formatTime(value) {
  if (value === undefined || value === null || value === '') return '';
  const date = typeof value === 'number' ? new Date(value < 1e12 ? value * 1000 : value) : new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}
