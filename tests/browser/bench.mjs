#!/usr/bin/env node
// Browser benchmark of the consumer view with many offers: publishes N
// offers (default 10,000) to a fresh catalog, then measures in Debian's
// headless Chromium
//   - time to the first offer on screen: navigation start → the first card
//     is in the DOM (the page's own clock, performance.now());
//   - time per filter keystroke: typing into Search and into Memory, from
//     the input event to the next animation frame (filtering, sorting,
//     patching the DOM, style and layout of that frame).
// The targets are about the UI, so measure against a release catalog (its
// snapshot then costs little of the time to the first offer):
//   cargo build --release -p catalog --bin catalog
//   node tests/browser/bench.mjs [offers]      # default 10000
// It runs target/release/catalog when built, else target/debug/catalog
// (CATALOG_BIN picks another). Prints one line per figure and the load
// average; docs/benchmarks.md keeps the results.

import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

import { Catalog, freePort } from './lib/catalog.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '../..');
const total = Number(process.argv[2] ?? 10000);
const PROVIDERS = 10;
const CONCURRENCY = 16;
const workDir = mkdtempSync(join(tmpdir(), 'catalog-bench-'));
const port = await freePort();
const release = join(repo, 'target', 'release', 'catalog');
const bin = process.env.CATALOG_BIN ?? (existsSync(release) ? release : join(repo, 'target', 'debug', 'catalog'));
console.log(`catalog: ${bin}`);
const catalog = new Catalog({
  bin,
  port, dataDir: join(workDir, 'data'), logFile: join(workDir, 'catalog.log'),
  extraArgs: ['--auth-rate-limit', '0'],
});
const base = catalog.url;
const stats = (xs) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return `median ${at(0.5).toFixed(1)} ms, p90 ${at(0.9).toFixed(1)} ms, max ${sorted[sorted.length - 1].toFixed(1)} ms (${xs.length} keystrokes)`;
};

let browser = null;
try {
  await catalog.start();
  const started = Date.now();
  const tokens = [];
  for (let p = 0; p < PROVIDERS; p += 1) {
    const r = await fetch(`${base}/authenticate`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ clusterID: `bench-provider-${p}`, clusterName: `bench #${p}`, authURL: `https://bench-${p}.example.org`, token: `bench-token-${p}` }),
    });
    tokens.push((await r.json()).token);
  }
  let next = 0;
  const types = ['compute', 'storage', 'gpu', 'memory'];
  const worker = async () => {
    while (next < total) {
      const i = next;
      next += 1;
      const body = {
        name: `Offer ${i}`, type: types[i % types.length], description: `Benchmark offer number ${i}.`,
        plans: {
          small: { name: 'small', cost: `${(i % 50) + 1}.5`, resources: { cpu: `${1 + (i % 8)}`, memory: `${2 ** (i % 6)}Gi` } },
          large: { name: 'large', cost: `${(i % 50) * 2 + 3}.0`, resources: { cpu: `${8 + (i % 16)}`, memory: `${16 * (1 + (i % 4))}Gi`, 'nvidia.com/gpu': `${i % 3}` } },
        },
      };
      const r = await fetch(`${base}/offer/bench-${i}`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${tokens[i % PROVIDERS]}` }, body: JSON.stringify(body) });
      if (!r.ok) throw new Error(`offer ${i}: ${r.status} ${await r.text()}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  console.log(`published ${total} offers in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.addInitScript(() => {
    new MutationObserver((_, observer) => {
      if (document.querySelector('ul.offer-list > li')) {
        window.__firstOffer = performance.now();
        observer.disconnect();
      }
    }).observe(document, { childList: true, subtree: true });
  });
  const firsts = [];
  for (let run = 0; run < 3; run += 1) {
    await page.goto(`${base}/`);
    await page.waitForFunction(() => window.__firstOffer !== undefined, null, { timeout: 60000 });
    firsts.push(await page.evaluate(() => window.__firstOffer));
  }
  console.log(`first offer on screen: ${firsts.map((t) => `${t.toFixed(0)} ms`).join(', ')} (3 page loads)`);
  await page.waitForFunction((n) => document.querySelector('.result-count')?.textContent === `${n} offers`, total, { timeout: 60000 });

  const typeInto = (label, text) => page.evaluate(async ({ label: l, text: t }) => {
    const control = [...document.querySelectorAll('label')].find((el) => el.textContent === l).control;
    const times = [];
    control.value = '';
    control.dispatchEvent(new Event('input', { bubbles: true }));
    for (const ch of t) {
      await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
      const t0 = performance.now();
      control.value += ch;
      control.dispatchEvent(new Event('input', { bubbles: true }));
      await new Promise((r) => requestAnimationFrame(r));
      times.push(performance.now() - t0);
    }
    return times;
  }, { label, text });
  const search = [];
  const memory = [];
  for (let run = 0; run < 3; run += 1) {
    search.push(...await typeInto('Search', 'offer 12'));
    search.push(...await typeInto('Search', ''));
    memory.push(...await typeInto('Memory', '16Gi'));
    memory.push(...await typeInto('Memory', ''));
  }
  console.log(`filter keystroke, Search: ${stats(search)}`);
  console.log(`filter keystroke, Memory (quantities): ${stats(memory)}`);
  console.log(`load average: ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
} finally {
  if (browser) await browser.close();
  await catalog.stop();
  rmSync(workDir, { recursive: true, force: true });
}
