// A command the consumer copies into a terminal (liqoctl, kubectl): shown
// as focusable, labelled preformatted text with a Copy button that says
// what happened.

import { h, srOnly } from '../dom.js';

/** A command (or file) with a Copy button; without clipboard access the text is selected instead. */
export function copyBlock(label, text, dataRole) {
  const status = h('span', { class: 'copy-status', role: 'status' });
  const code = h('pre', { class: 'command', tabindex: '0', 'aria-label': label }, h('code', { 'data-role': dataRole, text }));
  const button = h('button', {
    type: 'button', class: 'button button--secondary button--small', 'data-copy': dataRole,
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(text);
        status.textContent = 'Copied.';
      } catch {
        // No clipboard access: select the text so Ctrl+C copies it.
        const range = document.createRange();
        range.selectNodeContents(code);
        const selection = getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        status.textContent = 'Selected: press Ctrl+C to copy.';
      }
    },
  }, 'Copy', srOnly(` ${label.charAt(0).toLowerCase()}${label.slice(1)}`));
  return h('div', { class: 'copy-block' }, code, h('p', { class: 'copy-actions' }, button, status));
}
