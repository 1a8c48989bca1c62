// The page's entry point: one offer store and one live feed for the whole
// page, the connection indicator, the announcer for screen readers, and a
// hash router (#/ consumer, #/offer/<id> plan comparison, #/provider…) so the
// single index.html the catalog serves holds every view.

import { listOffers } from './api.js';
import { FeedState } from './feed.js';
import { feed, store } from './live.js';
import { mountConsumer } from './views/consumer.js';
import { mountOfferDetail } from './views/offer-detail.js';
import { mountProvider } from './views/provider.js';
import { mountEditor } from './views/editor.js';
import { loadUiConfig } from './pricing.js';
import { consumerSession, finishOidcSignIn } from './consumer-session.js';
import { mountSignIn } from './views/sign-in.js';
import { mountMine } from './views/mine.js';
import { mountReservation } from './views/reservation.js';
import { mountContract } from './views/contract.js';
import { mountServiceOrder } from './views/service-order.js';
import { mountServiceInstance } from './views/service-instance.js';


/** Polite screen-reader announcements ("New offer: …"). */
function announce(message) {
  const region = document.getElementById('announcer');
  const line = document.createElement('p');
  line.textContent = message;
  region.append(line);
  // Keep the region short: old lines have been read already.
  while (region.childElementCount > 5) region.firstElementChild.remove();
}

// A one-shot REST load so the page shows offers even while the feed is
// still connecting (or down); the feed's snapshot replaces it when it comes.
const restLoad = { error: null, pending: false, attempted: false };
async function loadOverRest() {
  restLoad.pending = true;
  restLoad.attempted = true;
  try {
    const offers = await listOffers();
    restLoad.error = null;
    if (!store.loaded || (store.source === 'rest' && feed.state !== FeedState.LIVE)) store.replaceAll(offers, 'rest');
  } catch (err) {
    restLoad.error = err;
  } finally {
    restLoad.pending = false;
    store.dispatchEvent(new CustomEvent('restload'));
  }
}

// --- connection indicator ---------------------------------------------------
const indicator = {
  box: document.getElementById('connection'),
  text: document.getElementById('connection-text'),
  countdown: document.getElementById('connection-countdown'),
  retry: document.getElementById('connection-retry'),
  ticker: null,
};
const STATE_TEXT = {
  [FeedState.CONNECTING]: 'Connecting to the live feed…',
  [FeedState.LIVE]: 'Live: offers update as they change',
  [FeedState.WAITING]: 'Disconnected from the live feed; reconnecting',
  [FeedState.STOPPED]: 'Live feed stopped',
};
function renderIndicator() {
  const { state } = feed;
  indicator.box.dataset.state = state;
  const text = STATE_TEXT[state];
  if (indicator.text.textContent !== text) indicator.text.textContent = text;
  indicator.retry.hidden = state !== FeedState.WAITING;
  clearInterval(indicator.ticker);
  indicator.countdown.textContent = '';
  if (state === FeedState.WAITING && feed.retryAt) {
    const tick = () => {
      const seconds = Math.max(0, Math.ceil((feed.retryAt - Date.now()) / 1000));
      indicator.countdown.textContent = `in ${seconds} s`;
    };
    tick();
    indicator.ticker = setInterval(tick, 1000);
  }
}
indicator.retry.addEventListener('click', () => feed.reconnectNow());
feed.addEventListener('state', () => {
  renderIndicator();
  // While the feed is down and the page has nothing to show, keep trying REST too.
  if (feed.state === FeedState.WAITING && !store.loaded && !restLoad.pending) loadOverRest();
});

// --- router -------------------------------------------------------------------
const routes = [
  { pattern: /^\/?$/, nav: 'consumer', mount: mountConsumer },
  { pattern: /^\/offer\/(.+)$/, nav: 'consumer', mount: mountOfferDetail },
  { pattern: /^\/providers\/(.+)$/, nav: 'consumer', mount: mountConsumer },
  { pattern: /^\/provider\/?$/, nav: 'provider', mount: mountProvider },
  { pattern: /^\/provider\/new$/, nav: 'provider', mount: mountEditor },
  { pattern: /^\/provider\/edit\/(.+)$/, nav: 'provider', mount: mountEditor },
  { pattern: /^\/sign-in$/, nav: 'mine', mount: mountSignIn },
  { pattern: /^\/mine$/, nav: 'mine', mount: mountMine },
  { pattern: /^\/reservation\/(.+)$/, nav: 'mine', mount: mountReservation },
  { pattern: /^\/contract\/(.+)$/, nav: 'mine', mount: mountContract },
  { pattern: /^\/service\/(.+)$/, nav: 'consumer', mount: mountServiceOrder },
  { pattern: /^\/service-instance\/(.+)$/, nav: 'mine', mount: mountServiceInstance },
];

const ctx = {
  store,
  feed,
  restLoad,
  announce,
  reloadOverRest: loadOverRest,
  /** Put the current view's state in the address without a new history entry or routing again. */
  replaceHash(hash) {
    if (location.hash === hash) return;
    // The address moved on and its hashchange is not handled yet (a link, the
    // back button, a live update landing as the user clicks): the view being
    // left must not write over where the user is going.
    if (location.hash.replace(/^#/, '') !== routedHash) return;
    history.replaceState(null, '', hash);
    // Read back: the browser may percent-encode what it stores.
    routedHash = location.hash.replace(/^#/, '');
  },
  navigate(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  },
  /** A message shown once by the next view (e.g. "Offer saved"). */
  flash: null,
  /** Set by a view with unsaved changes: returns false to stay. */
  leaveGuard: null,
  /** Where to go back to after signing in (an editor whose session expired). */
  returnTo: null,
};

let unmount = null;
let firstRoute = true;
let routedHash = null;

function route() {
  const hash = location.hash.replace(/^#/, '');
  // In-page anchors (the skip link) are not routes.
  if (hash !== '' && !hash.startsWith('/')) return;
  if (routedHash !== null && hash !== routedHash && ctx.leaveGuard && !ctx.leaveGuard()) {
    // Stay: put the address back without routing again.
    history.replaceState(null, '', `#${routedHash}`);
    return;
  }
  routedHash = hash;
  const [path, query = ''] = hash.split('?');
  let match = null;
  let found = routes[0];
  for (const candidate of routes) {
    match = candidate.pattern.exec(path);
    if (match) {
      found = candidate;
      break;
    }
  }
  const params = match ? match.slice(1).map((part) => {
    try {
      return decodeURIComponent(part);
    } catch {
      return part;
    }
  }) : [];
  if (unmount) unmount();
  const main = document.getElementById('main');
  main.replaceChildren();
  for (const link of document.querySelectorAll('[data-nav]')) {
    if (link.dataset.nav === found.nav) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  unmount = found.mount(main, ctx, params, new URLSearchParams(query)) ?? null;
  // After navigation, move focus to the new view's heading so keyboard and
  // screen-reader users start at the top of what changed (not on first load).
  if (!firstRoute) {
    const heading = main.querySelector('h1');
    if (heading) {
      heading.setAttribute('tabindex', '-1');
      heading.focus({ preventScroll: false });
    }
    window.scrollTo(0, 0);
  }
  firstRoute = false;
}

document.querySelector('[data-skip-link]').addEventListener('click', (event) => {
  event.preventDefault();
  const main = document.getElementById('main');
  (main.querySelector('h1') ?? main).focus();
});

window.addEventListener('hashchange', route);
window.addEventListener('pagehide', () => feed.stop());
// Back from the back/forward cache: the socket was closed on the way out.
window.addEventListener('pageshow', (event) => {
  if (event.persisted) feed.start();
});

/** The header's link to the consumer's purchases says who is signed in. */
function renderConsumerLink() {
  const link = document.querySelector('[data-nav="mine"]');
  const session = consumerSession();
  link.textContent = session ? 'My purchases' : 'Sign in to buy';
  link.setAttribute('href', session ? '#/mine' : '#/sign-in');
}
window.addEventListener('consumer-session', renderConsumerLink);

renderIndicator();
feed.start(); // started by live.js already; again after a stop
// The feed's snapshot usually comes first; the REST list is the way in when
// the feed is slow or down (loading both at once doubles the work with many offers).
const REST_FALLBACK_MS = 1500;
setTimeout(() => {
  if (!restLoad.attempted && (!store.loaded || feed.state !== FeedState.LIVE)) loadOverRest();
}, REST_FALLBACK_MS);
await loadUiConfig();
// Back from the OpenID Connect issuer: finish signing in, then go where the consumer was.
const returned = await finishOidcSignIn();
if (returned) {
  if (returned.error) ctx.flash = { kind: 'error', text: returned.error };
  else ctx.flash = { kind: 'ok', text: `Signed in as ${consumerSession()?.name}.` };
  history.replaceState(null, '', returned.returnTo);
}
renderConsumerLink();
route();
