// Labelled form fields with a hint and an error slot, wired for assistive
// technology (aria-describedby, aria-invalid), and the mapping from a server
// message such as "plans.basic.resources.memory: …" to the input it names.

import { h, uid } from './dom.js';

/**
 * A labelled control. Returns { wrapper, control, error, setError }.
 * `control` is created from `tag` ('input', 'textarea', 'select') with `attrs`.
 */
export function field({ label, tag = 'input', attrs = {}, hint = '', children = [], class: cls = '' }) {
  const id = uid('field');
  const hintId = hint ? `${id}-hint` : null;
  const errorId = `${id}-error`;
  const control = h(tag, { id, ...attrs }, ...children);
  const error = h('p', { id: errorId, class: 'field-error', hidden: true });
  const wrapper = h('div', { class: `field ${cls}`.trim() },
    h('label', { for: id, text: label }),
    hint ? h('p', { id: hintId, class: 'hint', text: hint }) : null,
    control,
    error);
  const describe = (withError) => {
    const ids = [hintId, withError ? errorId : null].filter(Boolean).join(' ');
    if (ids) control.setAttribute('aria-describedby', ids);
    else control.removeAttribute('aria-describedby');
  };
  describe(false);
  // `hiddenPrefix`: words only screen readers need ("Not applied: "), for errors kept short on screen.
  const setError = (message, hiddenPrefix = '') => {
    if (message) {
      error.replaceChildren(hiddenPrefix ? h('span', { class: 'visually-hidden', text: hiddenPrefix }) : '', message);
      error.hidden = false;
      control.setAttribute('aria-invalid', 'true');
      wrapper.classList.add('has-error');
    } else {
      error.textContent = '';
      error.hidden = true;
      control.removeAttribute('aria-invalid');
      wrapper.classList.remove('has-error');
    }
    describe(Boolean(message));
  };
  control.fieldApi = { wrapper, control, error, setError };
  return control.fieldApi;
}

/** Characters a path segment may contain (resource names hold dots and slashes: "nvidia.com/gpu"). */
const PATH_CHAR = /[A-Za-z0-9_.\/-]/;

/**
 * Find which known field path a server message names. `paths` maps a path
 * ("name", "plans.basic.cost", "plans.basic.resources.nvidia.com/gpu") to a
 * target. Multi-segment paths may appear anywhere in the message (whole, not
 * as part of a longer path) and the longest wins; a single-segment path
 * ("name") only counts at the start, followed by ":", so an ordinary word in
 * the message is not mistaken for a field.
 */
export function matchFieldPath(message, paths, explicit = null) {
  if (explicit && paths.has(explicit)) return explicit;
  const text = String(message ?? '');
  let best = null;
  for (const path of paths.keys()) {
    if (best && path.length <= best.length) continue;
    if (!path.includes('.')) {
      const rest = text.slice(path.length);
      if (text.startsWith(path) && /^\s*:/.test(rest)) best = path;
      continue;
    }
    let from = 0;
    for (;;) {
      const at = text.indexOf(path, from);
      if (at < 0) break;
      const before = at === 0 ? '' : text[at - 1];
      const after = text[at + path.length] ?? '';
      // A trailing "." or "/" after the path is punctuation only if nothing path-like follows it.
      const afterOk = after === '' || !PATH_CHAR.test(after)
        || ((after === '.' || after === '/') && !PATH_CHAR.test(text[at + path.length + 1] ?? ''));
      if ((before === '' || !PATH_CHAR.test(before)) && afterOk) {
        best = path;
        break;
      }
      from = at + 1;
    }
  }
  return best;
}
