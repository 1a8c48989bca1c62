// The consumer feed client: one WebSocket to the catalog's /subscribe,
// applying its messages to the offer store and reconnecting with capped,
// jittered exponential backoff when the connection drops.
//
// Messages are JSON text: {"type":"snapshot","seq":N,"offers":[…]} replaces
// everything (sent on connect, and after every change in the default mode);
// {"type":"upsert","seq":N,"offer":{…}} and {"type":"delete","seq":N,"id":"…"}
// patch (delta mode). Unknown types are ignored so the server can add some.

export const FeedState = Object.freeze({
  CONNECTING: 'connecting', // socket opening or waiting for the first snapshot
  LIVE: 'live', // snapshot received, changes arrive as they happen
  WAITING: 'waiting', // disconnected, a reconnect is scheduled
  STOPPED: 'stopped',
});

export class LiveFeed extends EventTarget {
  /**
   * @param {object} options
   * @param {string} options.url       ws:// or wss:// URL of /subscribe
   * @param {import('./store.js').OfferStore} options.store
   * @param {number} [options.minDelay] first reconnect delay, ms
   * @param {number} [options.maxDelay] cap on the reconnect delay, ms
   */
  constructor({ url, store, minDelay = 500, maxDelay = 15000 }) {
    super();
    this.url = url;
    this.store = store;
    this.minDelay = minDelay;
    this.maxDelay = maxDelay;
    this.state = FeedState.STOPPED;
    this.failures = 0; // consecutive connections that ended before a snapshot
    this.retryAt = null;
    this.lastSeq = null;
    this.lastError = '';
    this.socket = null;
    this.timer = null;
    this.onOnline = () => {
      if (this.state === FeedState.WAITING) this.reconnectNow();
    };
  }

  start() {
    if (this.state !== FeedState.STOPPED) return;
    window.addEventListener('online', this.onOnline);
    this.#connect();
  }

  stop() {
    window.removeEventListener('online', this.onOnline);
    clearTimeout(this.timer);
    this.timer = null;
    this.#setState(FeedState.STOPPED);
    const socket = this.socket;
    this.socket = null;
    if (socket) socket.close(1000, 'page closed');
  }

  /** Skip the backoff and try again now (the "Reconnect now" button, or the browser coming back online). */
  reconnectNow() {
    if (this.state !== FeedState.WAITING) return;
    clearTimeout(this.timer);
    this.timer = null;
    this.#connect();
  }

  #connect() {
    this.lastSeq = null;
    this.retryAt = null;
    this.#setState(FeedState.CONNECTING);
    let socket;
    try {
      socket = new WebSocket(this.url);
    } catch (err) {
      this.lastError = String(err?.message ?? err);
      this.#scheduleReconnect();
      return;
    }
    this.socket = socket;
    socket.addEventListener('message', (event) => {
      if (this.socket === socket) this.#onMessage(event.data);
    });
    socket.addEventListener('close', (event) => {
      if (this.socket !== socket) return;
      this.socket = null;
      if (this.state === FeedState.STOPPED) return;
      this.lastError = event.code === 1006 ? 'connection lost' : `closed (${event.code}${event.reason ? `: ${event.reason}` : ''})`;
      if (this.state !== FeedState.LIVE) this.failures += 1;
      this.#scheduleReconnect();
    });
  }

  #onMessage(data) {
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      console.warn('feed: ignoring a message that is not JSON');
      return;
    }
    if (!message || typeof message !== 'object') return;
    const seq = typeof message.seq === 'number' ? message.seq : null;
    switch (message.type) {
      case 'snapshot':
        // A snapshot is the whole truth whatever its number (a restarted server starts over).
        this.store.replaceAll(Array.isArray(message.offers) ? message.offers : [], 'feed');
        this.lastSeq = seq;
        this.failures = 0;
        this.lastError = '';
        this.#setState(FeedState.LIVE);
        break;
      case 'upsert':
        if (this.#stale(seq)) return;
        if (message.offer) this.store.upsert(message.offer, 'feed');
        break;
      case 'delete':
        if (this.#stale(seq)) return;
        if (message.id !== undefined && message.id !== null) this.store.remove(String(message.id), 'feed');
        break;
      default:
        // Keep-alives and future message types: nothing to do.
        break;
    }
  }

  /** A delta older than what we already applied (duplicate or reordered) is dropped. */
  #stale(seq) {
    if (seq === null) return false;
    if (this.lastSeq !== null && seq <= this.lastSeq) return true;
    this.lastSeq = seq;
    return false;
  }

  #scheduleReconnect() {
    const exponent = Math.min(Math.max(this.failures - 1, 0), 10);
    const base = Math.min(this.maxDelay, this.minDelay * 2 ** exponent);
    const delay = Math.round(base * (0.8 + Math.random() * 0.4));
    this.retryAt = Date.now() + delay;
    this.#setState(FeedState.WAITING);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.#connect();
    }, delay);
  }

  #setState(state) {
    const changed = this.state !== state;
    this.state = state;
    if (changed || state === FeedState.WAITING) {
      this.dispatchEvent(new CustomEvent('state', { detail: { state } }));
    }
  }
}
