// The consumer view: the live list of offers with filters. The list is
// patched in place as the feed reports changes (cards keyed by offer id),
// so new, changed and withdrawn offers show up without a reload and without
// moving the keyboard focus of someone reading another card.

import { formatTime, h, replaceChildren, srOnly, uid } from '../dom.js';
import { FeedState } from '../feed.js';
import { RESOURCE_FILTERS, isUnfiltered, lowestCost, offerMatches, parseFilters, planMatches } from '../filters.js';
import { filterState, queryString, readQuery, resetFilters } from '../filter-state.js';
import { compare } from '../quantity.js';
import { naturalCollator, resourceColumns, timeValue } from '../model.js';
import { field } from '../fields.js';
import { SELF_CHECKS } from '../self-checks.js';
import { serviceBadge } from '../service.js';
import { offerTable, sortRows } from './offer-table.js';
import { formatCost, periodText, uiConfig } from '../pricing.js';

const byName = (a, b) => naturalCollator.compare(a.name, b.name) || naturalCollator.compare(a.id, b.id);
// "Newest" is when an offer was first published: editing an offer does not move it.
const SORTS = {
  newest: { label: 'Newest first', compare: (a, b) => (b.createdMs ?? timeValue(b.createdAt)) - (a.createdMs ?? timeValue(a.createdAt)) || byName(a, b) },
  cost: {
    label: 'Lowest cost first',
    compare: (a, b) => {
      const x = lowestCost(a)?.costValue;
      const y = lowestCost(b)?.costValue;
      if (x && y) return compare(x, y) || byName(a, b);
      return x ? -1 : y ? 1 : byName(a, b);
    },
  },
  name: { label: 'Name (A–Z)', compare: byName },
  provider: { label: 'Provider (A–Z)', compare: (a, b) => naturalCollator.compare(a.clusterName || a.clusterID, b.clusterName || b.clusterID) || byName(a, b) },
};

const RECENT_MS = 10000;

/** Offers per page (cards, or plans in the table view): the DOM holds one page, however many offers match. */
export const PAGE_SIZE = 50;

export function mountConsumer(main, ctx, [lockedProvider] = [], query = new URLSearchParams()) {
  readQuery(query);
  if (lockedProvider) filterState.raw.provider = lockedProvider;
  const { store, feed, restLoad } = ctx;
  const providerName = () => store.all().find((o) => o.clusterID === lockedProvider)?.clusterName || lockedProvider;
  document.title = lockedProvider ? `Offers from ${providerName()} · Liqo resource catalog` : 'Offers · Liqo resource catalog';
  const basePath = lockedProvider ? `#/providers/${encodeURIComponent(lockedProvider)}` : '#/';
  const cards = new Map(); // id -> { offer, key, li }
  const recent = new Map(); // id -> { kind: 'New' | 'Updated', until }
  const order = { generation: -1, sort: null, list: [] }; // the sorted offers, see sortedOffers()
  let recentTimer = null;

  // --- filters -----------------------------------------------------------
  const searchField = field({
    label: 'Search', hint: 'Words in names, descriptions, providers, plans or labels',
    attrs: { name: 'q', type: 'search', autocomplete: 'off', spellcheck: 'false', value: filterState.raw.q },
  });
  const providerField = field({ label: 'Provider', tag: 'select', attrs: { name: 'provider' } });
  const labelsField = field({
    label: 'Labels', hint: 'key=value, e.g. tier=gold, region=eu',
    attrs: { name: 'labels', autocomplete: 'off', spellcheck: 'false', value: filterState.raw.labels },
  });
  const typeField = field({ label: 'Type', tag: 'select', attrs: { name: 'type' } });
  const costField = field({
    label: 'Maximum cost', hint: `${[uiConfig.currency.toUpperCase(), periodText()].filter(Boolean).join(' ')}, e.g. 2.5`,
    attrs: { name: 'maxCost', inputmode: 'decimal', autocomplete: 'off', spellcheck: 'false', value: filterState.raw.maxCost },
  });
  const minFields = Object.fromEntries(RESOURCE_FILTERS.map((filter) => [filter.key, field({
    label: filter.label, hint: filter.hint,
    attrs: { name: `min.${filter.key}`, autocomplete: 'off', spellcheck: 'false', value: filterState.raw.min[filter.key] },
  })]));
  const sortField = field({
    label: 'Sort', tag: 'select', attrs: { name: 'sort' },
    children: Object.entries(SORTS).map(([value, sort]) => h('option', { value, text: sort.label })),
  });
  sortField.control.value = filterState.sort;
  sortField.wrapper.classList.add('field--inline');
  sortField.control.addEventListener('change', () => {
    filterState.sort = sortField.control.value;
    filterState.page = 1;
    render();
  });
  // Cards or a compact table, as two toggle buttons.
  const viewButtons = Object.fromEntries([['cards', 'Cards'], ['table', 'Table']].map(([view, label]) => [view, h('button', {
    type: 'button', class: 'button button--secondary button--small', 'data-view': view, text: label,
    onclick: () => {
      filterState.view = view;
      filterState.page = 1;
      render();
    },
  })]));
  const viewToggle = h('div', { class: 'view-toggle', role: 'group', 'aria-label': 'Show offers as' }, Object.values(viewButtons));
  const clearButton = h('button', { type: 'button', class: 'button button--secondary', text: 'Clear filters', onclick: () => clearFilters() });

  const form = h('form', { class: 'filters', role: 'search', 'aria-labelledby': 'filters-heading', novalidate: true, onsubmit: (e) => e.preventDefault() },
    h('h2', { id: 'filters-heading', class: 'filters__heading', text: 'Filter offers' }),
    h('p', { class: 'hint', text: 'An offer is shown when one of its plans meets every filter. Amounts are Kubernetes quantities: 500m, 2, 4Gi, 100G.' }),
    searchField.wrapper,
    lockedProvider ? null : providerField.wrapper,
    labelsField.wrapper,
    typeField.wrapper,
    costField.wrapper,
    h('fieldset', { class: 'filters__resources' },
      h('legend', { text: 'One plan provides at least' }),
      h('p', { class: 'hint', text: 'Storage counts storage or ephemeral-storage; GPUs count nvidia.com/gpu, amd.com/gpu and other …/gpu resources.' }),
      h('div', { class: 'filters__grid' }, Object.values(minFields).map((f) => f.wrapper))),
    clearButton);

  // On a narrow screen the panel folds (closed at first) so the offers come first.
  const panelSummary = h('summary', { text: 'Filters' });
  const panel = h('details', { class: 'filters-panel' }, panelSummary, form);
  const narrow = window.matchMedia('(max-width: 48rem)');
  panel.open = !narrow.matches;
  const onNarrow = () => { panel.open = !narrow.matches; };
  narrow.addEventListener('change', onNarrow);

  form.addEventListener('input', (event) => {
    const { name, value } = event.target;
    filterState.page = 1;
    if (name === 'q') filterState.raw.q = value;
    else if (name === 'provider') filterState.raw.provider = value;
    else if (name === 'labels') filterState.raw.labels = value;
    else if (name === 'type') filterState.raw.type = value;
    else if (name === 'maxCost') filterState.raw.maxCost = value;
    else if (name?.startsWith('min.')) filterState.raw.min[name.slice(4)] = value;
    render();
  });

  function clearFilters() {
    resetFilters({ keepProvider: Boolean(lockedProvider) });
    searchField.control.value = '';
    labelsField.control.value = '';
    typeField.control.value = '';
    costField.control.value = '';
    for (const f of Object.values(minFields)) f.control.value = '';
    render();
    searchField.control.focus();
  }

  // --- results -------------------------------------------------------------
  const count = h('p', { class: 'result-count', role: 'status' });
  const banner = h('div', { class: 'banner-slot' });
  const list = h('ul', { class: 'offer-list', 'aria-label': 'Offers' });
  const tableSlot = h('div', { class: 'table-slot' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages of results' });
  const state = h('div', { class: 'state-slot' });
  const results = h('section', { class: 'results', 'aria-labelledby': 'results-heading' },
    h('h2', { id: 'results-heading', class: 'visually-hidden', text: 'Results' }),
    h('div', { class: 'results__toolbar' }, count, viewToggle, sortField.wrapper),
    banner, state, list, tableSlot, pager);

  const heading = h('h1', { text: lockedProvider ? `Offers from ${providerName()}` : 'Offers' });
  replaceChildren(main,
    lockedProvider ? h('p', { class: 'back-link' }, h('a', { href: '#/' }, h('span', { 'aria-hidden': 'true', text: '← ' }), 'All offers')) : null,
    h('div', { class: 'view-header' },
      heading,
      lockedProvider
        ? h('p', { class: 'lede' }, 'Every offer of this provider (cluster ID ', h('code', { text: lockedProvider }), '), updated live.')
        : h('p', { class: 'lede', text: 'Resources that providers in the federation offer for peering. The list updates by itself as providers publish, change and withdraw offers.' })),
    h('div', { class: 'consumer-layout' }, panel, results));

  // The option lists change only with the offers: rebuilt once per store generation.
  const optionsSeen = { providers: -1, types: -1 };
  function updateProviderOptions() {
    if (lockedProvider) return;
    if (optionsSeen.providers === store.generation && providerField.control.value === filterState.raw.provider) return;
    optionsSeen.providers = store.generation;
    const names = new Map();
    for (const o of store.offers.values()) if (!names.has(o.clusterID)) names.set(o.clusterID, o.clusterName || o.clusterID);
    const selected = filterState.raw.provider;
    if (selected && !names.has(selected)) names.set(selected, selected);
    const wanted = [['', 'All providers'], ...[...names].sort((a, b) => naturalCollator.compare(a[1], b[1]))];
    const current = [...providerField.control.options].map((o) => [o.value, o.textContent]);
    if (JSON.stringify(wanted) !== JSON.stringify(current)) {
      replaceChildren(providerField.control, wanted.map(([value, text]) => h('option', { value, text })));
    }
    providerField.control.value = selected;
  }

  function updateTypeOptions() {
    if (optionsSeen.types === store.generation && typeField.control.value === filterState.raw.type) return;
    optionsSeen.types = store.generation;
    const seen = new Set();
    for (const o of store.offers.values()) if (o.type) seen.add(o.type);
    const types = [...seen].sort(naturalCollator.compare);
    const selected = filterState.raw.type;
    if (selected && !types.includes(selected)) types.push(selected);
    const wanted = ['', ...types];
    const current = [...typeField.control.options].map((o) => o.value);
    if (JSON.stringify(wanted) !== JSON.stringify(current)) {
      replaceChildren(typeField.control, wanted.map((value) => h('option', { value, text: value || 'All types' })));
    }
    typeField.control.value = selected;
  }

  /** "2 plans", or "1 of 2 match" while a cost or resource filter is on: the only part of a card a filter changes. */
  function plansText(offer, active) {
    const planFiltered = active.maxCost || Object.keys(active.min).length > 0;
    if (!planFiltered) return String(offer.plans.length);
    let matching = 0;
    for (const plan of offer.plans) if (planMatches(plan, active)) matching += 1;
    return `${matching} of ${offer.plans.length} match`;
  }

  // Only a reported level gets a badge (one per self-check); what it means is its title here and spelled out on the offer's page.
  function selfCheckBadges(offer) {
    return SELF_CHECKS.map(({ field, of }) => {
      if (!offer[field]) return null;
      const { label, tone, explain } = of(offer[field]);
      return h('span', { class: `badge badge--${tone}`, 'data-field': field, title: explain }, label);
    });
  }

  function buildCard(offer, active, badge) {
    const headingId = uid('offer-heading');
    const cheapest = lowestCost(offer);
    const columns = resourceColumns(offer.plans).slice(0, 4);
    const range = (name) => {
      const entries = offer.plans.map((p) => p.resourceMap.get(name)).filter((e) => e?.quantity);
      if (entries.length === 0) return null;
      entries.sort((a, b) => compare(a.quantity, b.quantity));
      const low = entries[0].value;
      const high = entries[entries.length - 1].value;
      return low === high ? low : `${low} – ${high}`;
    };
    return h('article', { class: 'card', 'aria-labelledby': headingId },
      h('div', { class: 'card__top' },
        h('h3', { id: headingId, class: 'card__title', text: offer.name }),
        offer.type ? h('span', { class: 'badge badge--type' }, srOnly('Type: '), offer.type) : null,
        serviceBadge(offer),
        selfCheckBadges(offer),
        badge ? h('span', { class: `badge badge--${badge === 'New' ? 'new' : 'updated'}`, text: badge }) : null),
      h('p', { class: 'card__provider' },
        h('span', { class: 'label', text: 'Provider ' }),
        h('a', { href: `#/providers/${encodeURIComponent(offer.clusterID)}`, class: 'card__provider-link' },
          h('strong', { 'data-field': 'clusterName', text: offer.clusterName || 'unnamed cluster' }),
          srOnly(': all its offers')),
        h('br'),
        h('span', { class: 'label', text: 'Cluster ID ' }),
        h('code', { 'data-field': 'clusterID', text: offer.clusterID || 'unknown' })),
      offer.description ? h('p', { class: 'card__description', text: offer.description }) : null,
      h('dl', { class: 'card__facts' },
        h('div', {}, h('dt', { text: 'Plans' }), h('dd', { 'data-field': 'plans', text: plansText(offer, active) })),
        h('div', {}, h('dt', { text: 'From' }), h('dd', { 'data-field': 'lowestCost', text: cheapest ? formatCost(cheapest.cost) : '—' })),
        columns.map((name) => {
          const value = range(name);
          return value ? h('div', {}, h('dt', { text: name }), h('dd', { text: value })) : null;
        })),
      h('p', { class: 'card__actions' },
        h('a', { class: 'button', href: `#/offer/${encodeURIComponent(offer.id)}` },
          `Compare ${offer.plans.length === 1 ? 'the plan' : `${offer.plans.length} plans`}`,
          srOnly(` of ${offer.name}`))));
  }

  function renderState(visibleCount, active, errors) {
    const total = store.offers.size;
    if (!store.loaded) {
      // Both ways in have failed: REST answered with an error and the feed has dropped at least once.
      // Kept while a retry is under way (no flicker to "Loading" and back under the pointer).
      const failing = Boolean(restLoad.error)
        && (feed.state === FeedState.WAITING || feed.failures > 0);
      if (failing) {
        // A network failure's message repeats the advice below; only an HTTP answer adds information.
        const reason = restLoad.error?.status ? `HTTP ${restLoad.error.status}: ${restLoad.error.message}`
          : feed.lastError ? `live feed: ${feed.lastError}` : '';
        // Kept while it lasts, only its reason updated in place: the feed retrying must not redraw
        // the button under the pointer (each retry may fail with another reason).
        const shown = state.querySelector('[data-state="error"]');
        if (shown && state.dataset.shown?.startsWith('error|')) {
          if (state.dataset.shown !== `error|${reason}`) {
            state.dataset.shown = `error|${reason}`;
            shown.querySelector('[data-field="reason"]').textContent = reason ? `(${reason})` : '';
          }
          count.textContent = '';
          return;
        }
        state.dataset.shown = `error|${reason}`;
        replaceChildren(state, h('section', { class: 'notice notice--error', role: 'alert', 'data-state': 'error' },
          h('h2', { text: 'Can’t load offers' }),
          h('p', { text: `The catalog at ${location.host} is not answering.` }),
          h('p', { text: 'The page keeps retrying by itself. If this lasts, check that the catalog is running and that this computer can reach it, then try again.' }),
          h('p', {}, h('button', { type: 'button', class: 'button', text: 'Try again now', onclick: () => { feed.reconnectNow(); ctx.reloadOverRest(); } })),
          // Below the button: a reason of another length must not move it.
          h('p', { class: 'muted', 'data-field': 'reason', text: reason ? `(${reason})` : '' })));
      } else if (state.dataset.shown !== 'loading') {
        state.dataset.shown = 'loading';
        replaceChildren(state, h('p', { class: 'notice', 'data-state': 'loading', 'aria-busy': 'true', text: 'Loading offers…' }));
      }
      count.textContent = '';
      return;
    }
    state.dataset.shown = '';
    if (total === 0) {
      replaceChildren(state, h('section', { class: 'notice', 'data-state': 'empty' },
        h('h2', { text: 'No offers yet' }),
        h('p', { text: 'No provider has published an offer in this catalog. You don’t need to reload: new offers appear here as soon as they are published.' }),
        h('p', {}, 'Running a cluster? ', h('a', { href: '#/provider', text: 'Sign in as a provider and publish an offer' }), '.')));
    } else if (visibleCount === 0) {
      const describe = [];
      if (active.q.length) describe.push(`search “${filterState.raw.q.trim()}”`);
      if (active.provider && !lockedProvider) describe.push(`provider ${providerField.control.selectedOptions[0]?.textContent ?? active.provider}`);
      for (const [k, v] of active.labels) describe.push(`label ${k}=${v}`);
      if (active.type) describe.push(`type ${active.type}`);
      if (active.maxCost) describe.push(`maximum cost ${filterState.raw.maxCost.trim()}`);
      for (const f of RESOURCE_FILTERS) if (active.min[f.key]) describe.push(`at least ${filterState.raw.min[f.key].trim()} ${f.label === 'CPU' ? 'CPU' : f.label.toLowerCase()}`);
      replaceChildren(state, h('section', { class: 'notice', 'data-state': 'filtered-empty' },
        h('h2', { text: 'No offer matches your filters' }),
        h('p', { text: `All ${total} ${total === 1 ? 'offer is' : 'offers are'} hidden by: ${describe.join(', ')}. Try a higher maximum cost or smaller minimums, or clear the filters.` }),
        h('p', {}, h('button', { type: 'button', class: 'button button--secondary', text: 'Clear filters', onclick: () => clearFilters() }))));
    } else {
      state.replaceChildren();
    }
    const invalid = Object.keys(errors).length;
    const unfiltered = isUnfiltered(lockedProvider ? { ...active, provider: '' } : active);
    count.textContent = (unfiltered
      ? `${total} ${total === 1 ? 'offer' : 'offers'}`
      : `Showing ${visibleCount} of ${total} offers`) + (invalid ? ` (${invalid} filter${invalid === 1 ? '' : 's'} not applied)` : '');
  }

  function renderBanner() {
    if (store.loaded && feed.state === FeedState.WAITING) {
      replaceChildren(banner, h('p', { class: 'notice notice--warning', 'data-state': 'stale' },
        h('strong', { text: 'Live updates paused. ' }),
        `Showing offers as of ${formatTime(store.loadedAt)}. The page reconnects by itself; use “Reconnect now” at the top to try at once.`));
    } else {
      banner.replaceChildren();
    }
  }

  // The address follows the view state just after the frame that shows it
  // (history.replaceState costs several milliseconds in Chromium: not on the keystroke's frame).
  let addressPending = false;
  let disposed = false;
  function syncAddress() {
    if (addressPending) return;
    addressPending = true;
    requestAnimationFrame(() => setTimeout(() => {
      addressPending = false;
      if (!disposed) ctx.replaceHash(`${basePath}${queryString({ withProvider: !lockedProvider })}`);
    }, 0));
  }

  function render() {
    syncAddress();
    if (lockedProvider) {
      const name = providerName();
      if (heading.textContent !== `Offers from ${name}`) heading.textContent = `Offers from ${name}`;
    }
    for (const [view, button] of Object.entries(viewButtons)) button.setAttribute('aria-pressed', String(filterState.view === view));
    sortField.wrapper.hidden = filterState.view === 'table';
    const { active, errors } = parseFilters(filterState.raw);
    const applied = (active.type ? 1 : 0) + (active.maxCost ? 1 : 0) + Object.keys(active.min).length
      + (active.q.length ? 1 : 0) + (active.provider && !lockedProvider ? 1 : 0) + active.labels.length;
    labelsField.setError(errors.labels ?? '', 'Not applied: ');
    panelSummary.textContent = applied ? `Filters (${applied} applied)` : 'Filters';
    costField.setError(errors.maxCost ?? '', 'Not applied: ');
    for (const [key, f] of Object.entries(minFields)) f.setError(errors[`min.${key}`] ?? '', 'Not applied: ');
    updateTypeOptions();
    updateProviderOptions();

    const now = Date.now();
    const matching = [];
    // Filtering the kept sorted order keeps that order: a keystroke filters, it does not sort.
    const ordered = filterState.view === 'table' ? store.offers.values() : sortedOffers();
    for (const offer of ordered) if (offerMatches(offer, active)) matching.push(offer);
    let shownCount = matching.length;
    let visible = [];
    const planFiltered = Boolean(active.maxCost) || Object.keys(active.min).length > 0;
    if (filterState.view === 'table') {
      const rows = [];
      for (const offer of matching) for (const plan of offer.plans) if (!planFiltered || planMatches(plan, active)) rows.push({ offer, plan });
      sortRows(rows, filterState.tableSort);
      const pageRows = paginate(rows.length, rows);
      const focusedSort = document.activeElement?.dataset?.sort;
      replaceChildren(tableSlot, rows.length ? offerTable(pageRows, filterState.tableSort, (next) => {
        filterState.tableSort = next;
        filterState.page = 1;
        render();
      }) : null);
      if (focusedSort) tableSlot.querySelector(`[data-sort="${focusedSort}"]`)?.focus();
      tableSlot.hidden = false;
    } else {
      tableSlot.replaceChildren();
      tableSlot.hidden = true;
      visible = paginate(matching.length, matching);
    }
    shownCount = matching.length;
    const keep = new Set(visible.map((o) => o.id));
    for (const [id, card] of cards) {
      if (!keep.has(id)) {
        card.li.remove();
        cards.delete(id);
      }
    }
    let cursor = list.firstElementChild;
    for (const offer of visible) {
      const r = recent.get(offer.id);
      const badge = r && r.until > now ? r.kind : null;
      const key = badge ?? '';
      let card = cards.get(offer.id);
      if (!card) {
        card = { li: h('li', { 'data-offer-id': offer.id }) };
        cards.set(offer.id, card);
      }
      if (card.offer !== offer || card.key !== key) {
        const hadFocus = card.li.contains(document.activeElement);
        replaceChildren(card.li, buildCard(offer, active, badge));
        card.li.classList.toggle('is-recent', Boolean(badge));
        card.offer = offer;
        card.key = key;
        card.plans = card.li.querySelector('[data-field="plans"]');
        if (hadFocus) card.li.querySelector('a.button')?.focus();
      } else {
        // Same offer: a filter only changes how many of its plans match.
        const text = plansText(offer, active);
        if (card.plans.textContent !== text) card.plans.textContent = text;
      }
      if (card.li === cursor) cursor = cursor.nextElementSibling;
      else list.insertBefore(card.li, cursor);
    }
    list.hidden = visible.length === 0;
    renderState(shownCount, active, errors);
    renderBanner();
  }

  /** Every offer in the chosen sort order, sorted again only when the offers or the order change. */
  function sortedOffers() {
    const sort = SORTS[filterState.sort] ? filterState.sort : 'newest';
    if (order.generation !== store.generation || order.sort !== sort) {
      order.list = [...store.offers.values()].sort(SORTS[sort].compare);
      order.generation = store.generation;
      order.sort = sort;
    }
    return order.list;
  }

  /** The current page's slice of `items` (and the pager under the results). */
  function paginate(total, items) {
    const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
    // Before the offers have loaded, the page asked for (a link to page 2) is kept.
    const page = Math.min(filterState.page, pages);
    if (store.loaded) filterState.page = page;
    if (pages <= 1) {
      pager.replaceChildren();
      pager.hidden = true;
    } else {
      const go = (to) => () => {
        filterState.page = to;
        render();
        results.scrollIntoView({ block: 'start' });
        pager.querySelector(to > page ? '[data-page="next"]' : '[data-page="previous"]')?.focus();
      };
      replaceChildren(pager,
        h('button', { type: 'button', class: 'button button--secondary button--small', 'data-page': 'previous', disabled: page <= 1, onclick: go(page - 1) }, 'Previous', srOnly(' page')),
        h('span', { class: 'pager__where', text: `Page ${page} of ${pages}` }),
        h('button', { type: 'button', class: 'button button--secondary button--small', 'data-page': 'next', disabled: page >= pages, onclick: go(page + 1) }, 'Next', srOnly(' page')));
      pager.hidden = false;
    }
    return items.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE);
  }

  function scheduleRecentExpiry() {
    clearTimeout(recentTimer);
    const now = Date.now();
    let next = Infinity;
    for (const [id, r] of recent) {
      if (r.until <= now) recent.delete(id);
      else next = Math.min(next, r.until);
    }
    if (next !== Infinity) recentTimer = setTimeout(() => { render(); scheduleRecentExpiry(); }, next - now + 50);
  }

  const onChange = (event) => {
    const { added, updated, removed, initial } = event.detail;
    if (!initial) {
      const until = Date.now() + RECENT_MS;
      for (const offer of added) recent.set(offer.id, { kind: 'New', until });
      for (const offer of updated) if (recent.get(offer.id)?.kind !== 'New') recent.set(offer.id, { kind: 'Updated', until });
      for (const offer of removed) recent.delete(offer.id);
      scheduleRecentExpiry();
      const { active } = parseFilters(filterState.raw);
      const shown = (list2) => list2.filter((o) => offerMatches(o, active));
      const lines = [
        ...shown(added).map((o) => `New offer: ${o.name} from ${o.clusterName || o.clusterID}.`),
        ...shown(updated).map((o) => `Offer updated: ${o.name}.`),
        ...shown(removed).map((o) => `Offer withdrawn: ${o.name}.`),
      ];
      if (lines.length > 3) ctx.announce(`${lines.length} offers changed.`);
      else lines.forEach((line) => ctx.announce(line));
    }
    render();
  };
  const onFeedState = () => render();
  store.addEventListener('change', onChange);
  store.addEventListener('restload', onFeedState);
  feed.addEventListener('state', onFeedState);
  render();

  return () => {
    disposed = true;
    narrow.removeEventListener('change', onNarrow);
    clearTimeout(recentTimer);
    store.removeEventListener('change', onChange);
    store.removeEventListener('restload', onFeedState);
    feed.removeEventListener('state', onFeedState);
  };
}
