// Consumer sign-in: with the configured OpenID Connect issuer (when the
// catalog names one in /ui-config.json), or with a consumer token the
// catalog's administrator issued. Where the page goes afterwards is the
// `return` query parameter (a view of this page), else "My purchases".

import { h, replaceChildren } from '../dom.js';
import { field } from '../fields.js';
import { consumerSession, endConsumerSession, startConsumerSession, startOidcSignIn } from '../consumer-session.js';
import { uiConfig } from '../pricing.js';
import { errorSummary } from './error-summary.js';

/** A view of this page to go back to (never another site). */
export function safeReturn(value) {
  return typeof value === 'string' && value.startsWith('#/') ? value : '#/mine';
}

export function mountSignIn(main, ctx, _params, query = new URLSearchParams()) {
  document.title = 'Sign in to buy · Liqo resource catalog';
  const returnTo = safeReturn(query.get('return'));
  const session = consumerSession();
  const summary = errorSummary();
  const flash = ctx.flash;
  ctx.flash = null;

  const parts = [
    h('div', { class: 'view-header' },
      h('h1', { text: 'Sign in to buy' }),
      h('p', { class: 'lede', text: 'Reserving and buying plans needs a consumer identity. You stay signed in only in this tab.' })),
    flash ? h('p', { class: `notice ${flash.kind === 'error' ? 'notice--error' : 'notice--ok'}`, role: flash.kind === 'error' ? 'alert' : 'status', 'data-flash': flash.kind, text: flash.text }) : null,
  ];
  if (session) {
    parts.push(h('section', { class: 'notice notice--ok', 'data-state': 'signed-in' },
      h('p', {}, 'Signed in as ', h('strong', { text: session.name }), '.'),
      h('p', { class: 'form-actions' },
        h('a', { class: 'button', href: returnTo, text: 'Continue' }),
        h('button', { type: 'button', class: 'button button--secondary', text: 'Sign out', onclick: () => { endConsumerSession(); ctx.navigate(location.hash); } }))));
    replaceChildren(main, parts);
    return null;
  }
  if (uiConfig.oidc) {
    const issuerHost = (() => {
      try {
        return new URL(uiConfig.oidc.issuer).host;
      } catch {
        return uiConfig.oidc.issuer;
      }
    })();
    const oidcError = h('p', { class: 'field-error', role: 'alert', hidden: true });
    const button = h('button', {
      type: 'button', class: 'button', 'data-role': 'oidc-sign-in',
      onclick: async () => {
        button.disabled = true;
        oidcError.hidden = true;
        try {
          await startOidcSignIn(uiConfig.oidc, returnTo);
        } catch (err) {
          button.disabled = false;
          oidcError.textContent = `Could not reach the sign-in service at ${issuerHost}: ${err.message}`;
          oidcError.hidden = false;
        }
      },
    }, `Sign in with ${issuerHost}`);
    parts.push(h('section', { class: 'sign-in-choice', 'aria-labelledby': 'oidc-heading' },
      h('h2', { id: 'oidc-heading', text: 'With your organisation’s account' }),
      h('p', { class: 'hint', text: 'You go to the sign-in page of your identity provider and come back here.' }),
      h('p', {}, button), oidcError));
  }
  const tokenField = field({
    label: 'Consumer token', tag: 'textarea',
    hint: 'A token your catalog’s administrator issued for you (catalog --demo prints one).',
    attrs: { name: 'consumerToken', rows: '3', spellcheck: 'false', autocomplete: 'off' },
  });
  const form = h('form', { class: 'form narrow', novalidate: true, 'aria-labelledby': 'token-heading' },
    summary.element,
    h('h2', { id: 'token-heading', text: uiConfig.oidc ? 'Or with a consumer token' : 'With a consumer token' }),
    tokenField.wrapper,
    h('p', { class: 'form-actions' }, h('button', { type: 'submit', class: 'button', text: 'Sign in with the token' })));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    summary.clear();
    tokenField.setError('');
    const token = tokenField.control.value.trim();
    try {
      if (!token) throw new Error('Paste your consumer token.');
      const started = startConsumerSession(token, 'token');
      ctx.flash = { kind: 'ok', text: `Signed in as ${started.name}.` };
      ctx.navigate(returnTo);
    } catch (err) {
      tokenField.setError(err.message);
      summary.show([{ message: err.message, control: tokenField.control }]);
    }
  });
  parts.push(form);
  replaceChildren(main, parts);
  return null;
}

/**
 * The consumer session, or null after sending the page to sign in (and
 * back to the current view afterwards).
 */
export function requireConsumer(ctx, why = 'Sign in to buy.') {
  const session = consumerSession();
  if (session) return session;
  ctx.flash = { kind: 'error', text: why };
  const back = location.hash || '#/';
  queueMicrotask(() => ctx.navigate(`#/sign-in?return=${encodeURIComponent(back)}`));
  return null;
}

/** A 401 on a consumer call: the token expired or was revoked. */
export function consumerSessionExpired(ctx) {
  endConsumerSession();
  ctx.flash = { kind: 'error', text: 'Your consumer session has expired. Sign in again to go on.' };
  ctx.navigate(`#/sign-in?return=${encodeURIComponent(location.hash || '#/mine')}`);
}
