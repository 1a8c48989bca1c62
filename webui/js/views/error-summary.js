// The error summary at the top of a form: one alert listing every problem,
// each a link that moves focus to the field it is about.

import { h, replaceChildren } from '../dom.js';

export function errorSummary() {
  const list = h('ul', {});
  const heading = h('h2', { id: 'error-summary-heading', text: 'There is a problem' });
  const element = h('div', { class: 'error-summary', role: 'alert', tabindex: '-1', hidden: true, 'aria-labelledby': 'error-summary-heading' },
    heading, list);
  return {
    element,
    clear() {
      list.replaceChildren();
      element.replaceChildren(heading, list); // drop any extra actions a caller appended
      element.hidden = true;
    },
    /** items: [{ message, control }] — control null for problems no field owns. */
    show(items) {
      replaceChildren(list, items.map(({ message, control }) => h('li', {},
        control
          ? h('a', {
            href: control.id ? `#${control.id}` : '#',
            text: message,
            onclick: (event) => {
              event.preventDefault();
              // A group (fieldset) is not focusable itself: go to its first control.
              const target = control.matches('input, select, textarea, button')
                ? control
                : control.querySelector('input, select, textarea, button') ?? control;
              target.focus();
              target.scrollIntoView({ block: 'center' });
            },
          })
          : message)));
      element.hidden = items.length === 0;
      if (items.length) element.focus();
    },
  };
}
