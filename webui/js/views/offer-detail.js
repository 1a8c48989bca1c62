// One offer opened: who provides it (name, cluster ID) and the comparison
// table of its plans. Follows the live feed: a change redraws the table and
// a withdrawal says so instead of leaving stale data on screen.

import { formatTime, h, replaceChildren, srOnly } from '../dom.js';
import { isUnfiltered, parseFilters } from '../filters.js';
import { filterState, queryString } from '../filter-state.js';
import { planTable } from './plan-table.js';

export function mountOfferDetail(main, ctx, [id]) {
  const { store } = ctx;
  const body = h('div', { class: 'offer-detail' });
  const notice = h('div', { class: 'notice-slot', role: 'alert' });
  replaceChildren(main,
    h('p', { class: 'back-link' }, h('a', { href: `#/${queryString()}` }, h('span', { 'aria-hidden': 'true', text: '← ' }), 'All offers')),
    notice,
    body);
  let lastOffer = null;

  function render() {
    const offer = store.get(id);
    if (!offer) {
      if (!store.loaded) {
        replaceChildren(body, h('h1', { text: 'Offer' }), h('p', { class: 'notice', 'aria-busy': 'true', text: 'Loading offer…' }));
        return;
      }
      if (lastOffer) {
        replaceChildren(notice, h('p', { class: 'notice notice--warning', 'data-state': 'withdrawn' },
          h('strong', { text: 'This offer was withdrawn. ' }),
          'Its provider removed it from the catalog; what you see below is how it was. ',
          h('a', { href: '#/', text: 'Back to all offers' })));
        body.classList.add('is-withdrawn');
        return;
      }
      document.title = 'Offer not found · Liqo resource catalog';
      replaceChildren(body,
        h('h1', { text: 'Offer not found' }),
        h('section', { class: 'notice', 'data-state': 'not-found' },
          h('p', {}, 'There is no offer with the ID ', h('code', { text: id }), ' in this catalog. It may have been withdrawn.'),
          h('p', {}, h('a', { href: '#/', text: 'See all current offers' }))));
      return;
    }
    lastOffer = offer;
    notice.replaceChildren();
    body.classList.remove('is-withdrawn');
    document.title = `${offer.name} · Liqo resource catalog`;
    const { active } = parseFilters(filterState.raw);
    const planFiltered = !isUnfiltered({ ...active, type: '' });
    const headingHadFocus = document.activeElement?.tagName === 'H1' && body.contains(document.activeElement);
    replaceChildren(body,
      h('div', { class: 'view-header' },
        h('h1', { tabindex: '-1', text: offer.name }),
        offer.type ? h('p', {}, h('span', { class: 'badge badge--type' }, srOnly('Type: '), offer.type)) : null),
      offer.description ? h('p', { class: 'lede', text: offer.description }) : null,
      h('dl', { class: 'facts' },
        h('div', {}, h('dt', { text: 'Provider' }), h('dd', { 'data-field': 'clusterName', text: offer.clusterName || 'unnamed cluster' })),
        h('div', {}, h('dt', { text: 'Cluster ID' }), h('dd', {}, h('code', { 'data-field': 'clusterID', text: offer.clusterID || 'unknown' }))),
        h('div', {}, h('dt', { text: 'Offer ID' }), h('dd', {}, h('code', { text: offer.id }))),
        offer.version ? h('div', {}, h('dt', { text: 'Version' }), h('dd', { text: String(offer.version) })) : null,
        offer.updatedAt ? h('div', {}, h('dt', { text: 'Last changed' }), h('dd', { text: formatTime(offer.updatedAt) })) : null),
      h('h2', { text: 'Compare plans' }),
      planTable(offer, planFiltered ? active : null),
      h('p', { class: 'hint' },
        'To use a plan, peer your cluster with this provider (cluster ID ',
        h('code', { text: offer.clusterID || 'unknown' }),
        ') using the peering credentials it gives you.'));
    if (headingHadFocus) body.querySelector('h1')?.focus();
  }

  const onChange = () => render();
  store.addEventListener('change', onChange);
  render();
  return () => store.removeEventListener('change', onChange);
}
