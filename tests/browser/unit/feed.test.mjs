// The feed client against a scripted WebSocket: snapshot replaces, upsert
// and delete patch, unknown types and stale deltas are ignored, and a
// dropped connection is retried with growing, capped delays.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { FeedState, LiveFeed } from '../../../webui/js/feed.js';
import { OfferStore } from '../../../webui/js/store.js';

class FakeSocket extends EventTarget {
  static all = [];
  constructor(url) {
    super();
    this.url = url;
    this.closed = false;
    FakeSocket.all.push(this);
  }
  send() {}
  close() {
    this.closed = true;
  }
  message(data) {
    this.dispatchEvent(Object.assign(new Event('message'), { data: typeof data === 'string' ? data : JSON.stringify(data) }));
  }
  drop(code = 1006) {
    this.dispatchEvent(Object.assign(new Event('close'), { code, reason: '' }));
  }
}

globalThis.window = new EventTarget();
globalThis.WebSocket = FakeSocket;

const offer = (id, version) => ({ id, version, name: id, type: 't', clusterID: 'c', plans: {} });
const ids = (store) => store.all().map((o) => o.id).sort();

function setup(t, options = {}) {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  FakeSocket.all = [];
  const store = new OfferStore();
  const feed = new LiveFeed({ url: 'ws://catalog/subscribe?mode=delta', store, ...options });
  const states = [];
  feed.addEventListener('state', () => states.push(feed.state));
  feed.start();
  t.after(() => feed.stop());
  return { store, feed, states, socket: () => FakeSocket.all.at(-1) };
}

test('snapshot, upsert, delete; unknown types and stale deltas ignored', (t) => {
  const { store, feed, socket } = setup(t);
  assert.equal(feed.state, FeedState.CONNECTING);
  assert.equal(socket().url, 'ws://catalog/subscribe?mode=delta');
  socket().message({ type: 'snapshot', seq: 10, offers: [offer('a', 1), offer('b', 1)] });
  assert.equal(feed.state, FeedState.LIVE);
  assert.deepEqual(ids(store), ['a', 'b']);
  socket().message({ type: 'upsert', seq: 11, offer: offer('c', 1) });
  socket().message({ type: 'delete', seq: 12, id: 'a' });
  socket().message({ type: 'ping', seq: 13 });
  socket().message('not json');
  socket().message({ type: 'delete', seq: 12, id: 'b' }); // replayed: dropped
  assert.deepEqual(ids(store), ['b', 'c']);
  // The thesis mode: a full snapshot after every change.
  socket().message({ type: 'snapshot', seq: 14, offers: [offer('z', 1)] });
  assert.deepEqual(ids(store), ['z']);
});

test('reconnects with growing, capped, jittered delays and resets after a snapshot', (t) => {
  const { feed, states, socket } = setup(t, { minDelay: 100, maxDelay: 1000 });
  const delays = [];
  for (let i = 0; i < 6; i += 1) {
    const before = FakeSocket.all.length;
    socket().drop();
    assert.equal(feed.state, FeedState.WAITING);
    const delay = feed.retryAt - Date.now();
    delays.push(delay);
    t.mock.timers.tick(delay);
    assert.equal(FakeSocket.all.length, before + 1, 'a new socket after the delay');
  }
  const bases = [100, 200, 400, 800, 1000, 1000];
  delays.forEach((d, i) => assert.ok(d >= bases[i] * 0.8 && d <= bases[i] * 1.2, `delay ${i}: ${d} vs ${bases[i]}`));
  socket().message({ type: 'snapshot', seq: 1, offers: [] });
  assert.equal(feed.state, FeedState.LIVE);
  socket().drop();
  assert.ok(feed.retryAt - Date.now() <= 120, 'a live connection that drops is retried quickly');
  assert.ok(states.includes(FeedState.WAITING) && states.includes(FeedState.LIVE));
});

test('reconnectNow skips the wait; stop closes and stays stopped', (t) => {
  const { feed, socket } = setup(t, { minDelay: 5000 });
  socket().drop();
  const count = FakeSocket.all.length;
  feed.reconnectNow();
  assert.equal(FakeSocket.all.length, count + 1);
  const last = socket();
  feed.stop();
  assert.equal(last.closed, true);
  assert.equal(feed.state, FeedState.STOPPED);
  last.drop(1000);
  t.mock.timers.tick(60000);
  assert.equal(FakeSocket.all.length, count + 1, 'no reconnect after stop');
});
