// The page's one offer store and one live feed, started as early as the
// page allows: index.html loads this small module on its own (async), ahead
// of the views' larger module graph, so the feed's snapshot is on its way
// while the rest of the UI loads. app.js imports the same two instances
// (a module is evaluated once per page).

import { LiveFeed } from './feed.js';
import { OfferStore } from './store.js';

export const store = new OfferStore();
const wsScheme = location.protocol === 'https:' ? 'wss' : 'ws';
export const feed = new LiveFeed({ url: `${wsScheme}://${location.host}/subscribe?mode=delta`, store });
feed.start();
