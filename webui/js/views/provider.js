// The provider view: sign in with the cluster's peering credentials, then
// the list of this provider's own offers with edit and delete (delete asks
// for confirmation in a modal dialog).

import { authenticate, deleteOffer, listContracts, listOffers } from '../api.js';
import { formatTime, h, replaceChildren, srOnly } from '../dom.js';
import { FeedState } from '../feed.js';
import { field, matchFieldPath } from '../fields.js';
import { clearSession, currentSession, keepCredentialsForRenewal, saveSession } from '../session.js';
import { errorSummary } from './error-summary.js';
import { naturalCollator } from '../model.js';
import { planOps } from './plan-ops.js';

/** A 401 on a write: the token expired or was revoked. Sign out and say so. */
export function handleExpiredSession(ctx, text = 'Your session has expired. Sign in again to continue.') {
  clearSession();
  ctx.flash = { kind: 'error', text };
  ctx.navigate('#/provider');
}

function flashMessage(ctx) {
  const flash = ctx.flash;
  ctx.flash = null;
  if (!flash) return null;
  return h('p', {
    class: `notice ${flash.kind === 'error' ? 'notice--error' : 'notice--ok'}`,
    role: flash.kind === 'error' ? 'alert' : 'status',
    'data-flash': flash.kind,
    text: flash.text,
  });
}

export function mountProvider(main, ctx) {
  const session = currentSession();
  if (!session) return mountSignIn(main, ctx);
  return mountDashboard(main, ctx, session);
}

function mountSignIn(main, ctx) {
  document.title = 'Provider sign-in · Liqo resource catalog';
  const fields = {
    clusterID: field({ label: 'Cluster ID', hint: 'Your cluster’s Liqo cluster ID (liqoctl info shows it).', attrs: { name: 'clusterID', autocomplete: 'username', spellcheck: 'false', required: true } }),
    clusterName: field({ label: 'Cluster name', hint: 'The name consumers see next to your offers.', attrs: { name: 'clusterName', autocomplete: 'organization', spellcheck: 'false', required: true } }),
    authURL: field({ label: 'Auth URL', hint: 'Your cluster’s Liqo authentication endpoint, e.g. https://auth.example.org:443', attrs: { name: 'authURL', type: 'url', inputmode: 'url', autocomplete: 'url', spellcheck: 'false', required: true } }),
    token: field({ label: 'Token', hint: 'Your cluster’s Liqo peering token. The first sign-in for a cluster ID registers it; later sign-ins must use the same credentials.', attrs: { name: 'token', type: 'password', autocomplete: 'current-password', spellcheck: 'false', required: true } }),
  };
  const summary = errorSummary();
  const submit = h('button', { type: 'submit', class: 'button', text: 'Sign in' });
  const form = h('form', { class: 'form narrow', novalidate: true, 'aria-labelledby': 'signin-heading' },
    summary.element,
    Object.values(fields).map((f) => f.wrapper),
    h('p', { class: 'form-actions' }, submit));

  replaceChildren(main,
    h('div', { class: 'view-header' },
      h('h1', { id: 'signin-heading', text: 'Sign in as a provider' }),
      h('p', { class: 'lede', text: 'Sign in with your cluster’s peering credentials to publish and manage offers. You stay signed in only in this tab.' })),
    flashMessage(ctx),
    form);

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const values = Object.fromEntries(Object.entries(fields).map(([k, f]) => [k, f.control.value.trim()]));
    for (const f of Object.values(fields)) f.setError('');
    summary.clear();
    const problems = [];
    if (!values.clusterID) problems.push(['clusterID', 'Enter your cluster ID.']);
    if (!values.clusterName) problems.push(['clusterName', 'Enter your cluster’s name.']);
    if (!values.authURL) problems.push(['authURL', 'Enter your cluster’s auth URL.']);
    if (!values.token) problems.push(['token', 'Enter your cluster’s token.']);
    if (problems.length) {
      summary.show(problems.map(([k, message]) => { fields[k].setError(message); return { message, control: fields[k].control }; }));
      return;
    }
    if (!confirmedNew.has(values.clusterID) && !(await knownProvider(ctx, values.clusterID))) {
      askNewCluster(values);
      return;
    }
    await signIn(values);
  });

  // A typo in the cluster ID would silently register a second provider:
  // before claiming an ID no offer in the catalog comes from, ask.
  const confirmedNew = new Set();
  const confirmBox = h('div', { class: 'confirm-slot' });
  form.insertBefore(confirmBox, form.lastElementChild);
  function askNewCluster(values) {
    const sameName = ctx.store.all().find((o) => o.clusterName === values.clusterName && o.clusterID !== values.clusterID);
    const headingId = 'new-cluster-heading';
    const useKnown = sameName ? h('button', {
      type: 'button', class: 'button', text: `Use ${sameName.clusterID}`,
      onclick: () => {
        fields.clusterID.control.value = sameName.clusterID;
        confirmBox.replaceChildren();
        fields.token.control.focus();
      },
    }) : null;
    replaceChildren(confirmBox, h('section', { class: 'notice notice--warning', role: 'alert', 'aria-labelledby': headingId, 'data-state': 'new-cluster' },
      h('h2', { id: headingId, text: 'Register a new provider?' }),
      h('p', {}, 'No offer in this catalog comes from the cluster ID ', h('code', { text: values.clusterID }),
        '. Signing in with it registers a new provider, and only these credentials can use it from then on.'),
      sameName ? h('p', {}, h('strong', { text: values.clusterName }), ' is already a provider here, with the cluster ID ',
        h('code', { text: sameName.clusterID }), '. Did you mistype it?') : null,
      h('p', { class: 'form-actions' },
        useKnown,
        h('button', {
          type: 'button', class: sameName ? 'button button--secondary' : 'button', text: 'Register new provider',
          onclick: async () => {
            confirmedNew.add(values.clusterID);
            confirmBox.replaceChildren();
            await signIn(values);
          },
        }),
        h('button', {
          type: 'button', class: 'button button--secondary', text: 'Check the cluster ID',
          onclick: () => {
            confirmBox.replaceChildren();
            fields.clusterID.control.focus();
            fields.clusterID.control.select();
          },
        }))));
    confirmBox.querySelector('button')?.focus();
  }

  async function signIn(values) {
    submit.disabled = true;
    submit.textContent = 'Signing in…';
    try {
      const answer = await authenticate(values);
      keepCredentialsForRenewal(values);
      saveSession({ token: answer.token, expiresAt: answer.expiresAt ?? null, clusterID: values.clusterID, clusterName: values.clusterName });
      ctx.flash = { kind: 'ok', text: `Signed in as ${values.clusterName || values.clusterID}.` };
      const back = ctx.returnTo;
      ctx.returnTo = null;
      ctx.navigate(back && back.startsWith('#/provider/') ? back : '#/provider');
    } catch (err) {
      submit.disabled = false;
      submit.textContent = 'Sign in';
      if (err.status === 401) {
        fields.token.setError(err.message);
        summary.show([{ message: `${err.message.replace(/\.$/, '')}. The first sign-in for a cluster ID registers its name, auth URL and token; check all four.`, control: fields.token.control }]);
        return;
      }
      const paths = new Map(Object.entries(fields));
      const path = matchFieldPath(err.message, paths, err.field);
      if (path) fields[path].setError(err.message);
      summary.show([{ message: err.message, control: path ? fields[path].control : null }]);
    }
  }
  return null;
}

/** Does any offer in the catalog come from `clusterID`? (The feed's list, or the REST list when the feed has none yet.) */
async function knownProvider(ctx, clusterID) {
  if (ctx.store.all().some((o) => o.clusterID === clusterID)) return true;
  if (ctx.store.loaded) return false;
  try {
    return (await listOffers({ provider: clusterID })).length > 0;
  } catch {
    return false;
  }
}

function mountDashboard(main, ctx, session) {
  const { store, feed } = ctx;
  document.title = 'Your offers · Liqo resource catalog';
  const mine = (offer) => offer.clusterID === session.clusterID;
  const list = h('ul', { class: 'own-offers', 'aria-label': 'Your offers' });
  const state = h('div', { class: 'state-slot' });
  const status = h('div', { class: 'status-slot', role: 'status' });
  const newButton = h('a', { class: 'button', href: '#/provider/new', text: 'New offer' });
  const heading = h('h1', { text: 'Your offers' });

  const dialogError = h('p', { class: 'field-error', role: 'alert', hidden: true });
  const dialogText = h('p', {});
  const cancelButton = h('button', { type: 'button', class: 'button button--secondary', text: 'Cancel', autofocus: true });
  const confirmButton = h('button', { type: 'button', class: 'button button--danger', text: 'Delete offer' });
  const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': 'delete-heading' },
    h('h2', { id: 'delete-heading', text: 'Delete this offer?' }),
    dialogText,
    dialogError,
    h('p', { class: 'dialog__actions' }, cancelButton, confirmButton));
  let pendingDelete = null;
  cancelButton.addEventListener('click', () => dialog.close('cancel'));
  dialog.addEventListener('close', () => {
    const returnTo = pendingDelete?.opener;
    pendingDelete = null;
    if (returnTo?.isConnected) returnTo.focus();
  });
  confirmButton.addEventListener('click', async () => {
    if (!pendingDelete) return;
    const { offer } = pendingDelete;
    confirmButton.disabled = true;
    cancelButton.disabled = true;
    dialogError.hidden = true;
    try {
      await deleteOffer(offer.id, session.token);
      store.remove(offer.id, 'rest');
      finishDelete(offer);
    } catch (err) {
      if (err.status === 404) {
        store.remove(offer.id, 'rest');
        finishDelete(offer);
      } else if (err.status === 401) {
        dialog.close();
        handleExpiredSession(ctx);
      } else {
        dialogError.textContent = `Could not delete: ${err.message}`;
        dialogError.hidden = false;
      }
    } finally {
      confirmButton.disabled = false;
      cancelButton.disabled = false;
    }
  });
  function finishDelete(offer) {
    pendingDelete = null;
    dialog.close('deleted');
    replaceChildren(status, h('p', { class: 'notice notice--ok', 'data-flash': 'ok', text: `Deleted “${offer.name}”. Consumers no longer see it.` }));
    newButton.focus();
  }
  function askDelete(offer, opener) {
    pendingDelete = { offer, opener };
    dialogText.textContent = `“${offer.name}” (ID ${offer.id}) will disappear from every consumer’s list at once. This cannot be undone.`;
    dialogError.hidden = true;
    dialog.showModal();
    cancelButton.focus();
  }

  const signOut = h('button', {
    type: 'button', class: 'link-button', text: 'Sign out',
    onclick: () => {
      clearSession();
      ctx.flash = { kind: 'ok', text: 'Signed out.' };
      ctx.navigate('#/provider');
    },
  });
  replaceChildren(main,
    h('div', { class: 'view-header' },
      heading,
      h('p', { class: 'signed-in' },
        'Signed in as ', h('strong', { text: session.clusterName || session.clusterID }),
        ' (cluster ID ', h('code', { text: session.clusterID }), '). ', signOut)),
    flashMessage(ctx),
    status,
    h('p', {}, newButton),
    state,
    list,
    dialog);

  function row(offer) {
    return h('li', { class: 'own-offer', 'data-offer-id': offer.id },
      h('div', { class: 'own-offer__main' },
        h('h2', { class: 'own-offer__title', text: offer.name }),
        h('p', { class: 'muted' },
          'ID ', h('code', { text: offer.id }),
          offer.type ? ` · ${offer.type}` : '',
          ` · ${offer.plans.length} ${offer.plans.length === 1 ? 'plan' : 'plans'}`,
          offer.version ? ` · version ${offer.version}` : '',
          offer.updatedAt ? ` · changed ${formatTime(offer.updatedAt)}` : '')),
      h('p', { class: 'own-offer__actions' },
        h('a', { class: 'button button--secondary', href: `#/provider/edit/${encodeURIComponent(offer.id)}` }, 'Edit', srOnly(` ${offer.name}`)),
        h('a', { class: 'button button--secondary', href: `#/offer/${encodeURIComponent(offer.id)}` }, 'View', srOnly(` ${offer.name} as consumers see it`)),
        h('button', { type: 'button', class: 'button button--danger', onclick: (e) => askDelete(offer, e.currentTarget) }, 'Delete', srOnly(` ${offer.name}`))),
      planOps(offer, { ctx, session, open: openPlans, bought }));
  }
  // Plans shown under an offer stay shown across updates; a row being worked in is not rebuilt.
  const openPlans = new Set();
  const rows = new Map(); // offer id -> { offer, li }
  let bought = null; // "offer/plan" -> active contracts sold, where the catalog has contracts
  (async () => {
    try {
      const contracts = await listContracts(session.token);
      if (!contracts) return;
      bought = new Map();
      for (const c of contracts) if (c.active !== false) bought.set(`${c.offerID}/${c.planID}`, (bought.get(`${c.offerID}/${c.planID}`) ?? 0) + 1);
      rows.clear();
      render();
    } catch {
      // No contracts to count: the column says so.
    }
  })();

  let refreshError = null;
  let ownLoaded = false;
  function render() {
    const offers = store.all().filter(mine).sort((a, b) => naturalCollator.compare(a.name, b.name) || naturalCollator.compare(a.id, b.id));
    const focusedId = document.activeElement?.closest?.('[data-offer-id]')?.dataset.offerId;
    const items = offers.map((offer) => {
      const cached = rows.get(offer.id);
      if (cached?.offer === offer) return cached.li;
      if (cached && cached.li.contains(document.activeElement)) {
        cached.li.querySelector('.plan-ops')?.refresh(offer);
        cached.offer = offer;
        return cached.li;
      }
      const li = row(offer);
      rows.set(offer.id, { offer, li });
      return li;
    });
    for (const id of rows.keys()) if (!offers.some((o) => o.id === id)) rows.delete(id);
    // Patch in place: moving a node that holds the focus would drop it.
    const wanted = new Set(items);
    for (const child of [...list.children]) if (!wanted.has(child)) child.remove();
    let cursor = list.firstElementChild;
    for (const li of items) {
      if (li === cursor) cursor = cursor.nextElementSibling;
      else list.insertBefore(li, cursor);
    }
    if (focusedId && !list.contains(document.activeElement)) list.querySelector(`[data-offer-id="${CSS.escape(focusedId)}"] a`)?.focus();
    list.hidden = offers.length === 0;
    if (!store.loaded && !ownLoaded) {
      replaceChildren(state, refreshError
        ? h('p', { class: 'notice notice--error', role: 'alert', text: `Could not load your offers: ${refreshError.message} The page keeps trying.` })
        : h('p', { class: 'notice', 'aria-busy': 'true', text: 'Loading your offers…' }));
    } else if (offers.length === 0) {
      replaceChildren(state, h('section', { class: 'notice', 'data-state': 'empty' },
        h('h2', { text: 'No offers yet' }),
        h('p', { text: 'You have not published an offer. An offer is a set of plans, each with a cost and the resources it provides. Consumers see it the moment you publish.' }),
        h('p', {}, h('a', { href: '#/provider/new', text: 'Create your first offer' }))));
    } else {
      state.replaceChildren();
    }
  }

  // Fresh data for this provider when the feed cannot vouch for it.
  (async () => {
    try {
      const offers = await listOffers({ provider: session.clusterID });
      refreshError = null;
      ownLoaded = true;
      if (feed.state !== FeedState.LIVE) {
        const own = offers.filter((o) => (o.clusterID ?? o.provider?.clusterID) === session.clusterID);
        store.replaceWhere(mine, own, 'rest');
      }
      render();
    } catch (err) {
      refreshError = err;
      render();
    }
  })();

  const onChange = () => render();
  store.addEventListener('change', onChange);
  render();
  return () => {
    store.removeEventListener('change', onChange);
    if (dialog.open) dialog.close();
  };
}
