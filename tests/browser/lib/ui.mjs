// What a person does in the catalog's web UI, as Playwright steps: sign in,
// fill the offer editor (plans and resource rows), read the consumer list.

/** Sign in on the provider view of `page` and wait for the provider's offer list. */
export async function signIn(page, base, provider) {
  await page.goto(`${base}/#/provider`);
  await page.getByLabel('Cluster ID', { exact: true }).fill(provider.clusterID);
  await page.getByLabel('Cluster name', { exact: true }).fill(provider.clusterName);
  await page.getByLabel('Auth URL', { exact: true }).fill(provider.authURL);
  await page.getByLabel('Token', { exact: true }).fill(provider.token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  // A cluster ID no offer comes from yet is confirmed first (a typo would register a new provider).
  const register = page.getByRole('button', { name: 'Register new provider' });
  const done = page.getByRole('heading', { level: 1, name: provider.landing ?? 'Your offers' });
  await register.or(done).first().waitFor();
  if (await register.isVisible()) await register.click();
  await done.waitFor();
}

/** axe-core's violations on the current view (rule id: how many nodes), run in the page without touching its CSP. */
export async function axeViolations(page) {
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) {
    const { readFileSync } = await import('node:fs');
    const { createRequire } = await import('node:module');
    const source = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
    await page.evaluate(source);
  }
  return page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.length} × ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')} — ${v.nodes[0]?.failureSummary?.split('\n')[1]?.trim() ?? v.help}`);
  });
}

/** axe-core in both colour schemes: { light: [...], dark: [...] }. */
export async function axeBothSchemes(page) {
  const out = {};
  for (const colorScheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme });
    out[colorScheme] = await axeViolations(page);
  }
  await page.emulateMedia({ colorScheme: 'light' });
  return out;
}

/**
 * Fill the offer editor. `offer` = { id?, name, type, description, plans:
 * [{ key, name, cost, resources: [[name, quantity], …] }] }. Plans and rows are
 * added or removed with the editor's own buttons until the counts match.
 */
export async function fillOffer(page, offer) {
  const idField = page.getByLabel('Offer ID', { exact: true });
  if (offer.id !== undefined && (await idField.isEditable())) await idField.fill(offer.id);
  await page.getByLabel('Name', { exact: true }).fill(offer.name);
  await page.getByLabel('Type', { exact: true }).fill(offer.type);
  await page.getByLabel('Description', { exact: true }).fill(offer.description ?? '');
  const plans = page.locator('fieldset[data-role="plan"]');
  while ((await plans.count()) < offer.plans.length) await page.getByRole('button', { name: 'Add plan' }).click();
  while ((await plans.count()) > offer.plans.length) await plans.last().locator('[data-role="remove-plan"]').click();
  for (const [index, plan] of offer.plans.entries()) {
    const box = plans.nth(index);
    await box.getByLabel('Plan ID', { exact: true }).fill(plan.key);
    await box.getByLabel('Display name', { exact: true }).fill(plan.name ?? '');
    await box.getByLabel('Cost', { exact: true }).fill(plan.cost);
    const rows = box.locator('li.resource-row');
    while ((await rows.count()) < plan.resources.length) await box.getByRole('button', { name: 'Add resource' }).click();
    while ((await rows.count()) > plan.resources.length) await rows.last().locator('[data-role="remove-resource"]').click();
    for (const [rowIndex, [name, quantity]] of plan.resources.entries()) {
      const row = rows.nth(rowIndex);
      await row.getByLabel('Resource', { exact: true }).fill(name);
      await row.getByLabel('Quantity', { exact: true }).fill(quantity);
    }
  }
}

/** The consumer card of an offer. */
export function card(page, id) {
  return page.locator(`ul.offer-list > li[data-offer-id="${id}"]`);
}

/** Ids of the offers the consumer list shows, in order. */
export async function shownOfferIds(page) {
  return page.locator('ul.offer-list > li').evaluateAll((items) => items.map((li) => li.dataset.offerId));
}

/**
 * Problems an assistive-technology user would hit on the current view: form
 * controls without a label, buttons and links without a name, images without
 * alt, ids used twice. Returns a list of descriptions (empty when fine).
 */
export async function accessibilityProblems(page) {
  return page.evaluate(() => {
    const problems = [];
    const visible = (el) => el.getClientRects().length > 0 || el.type === 'hidden';
    const describe = (el) => `<${el.tagName.toLowerCase()}${el.id ? ` id="${el.id}"` : ''}${el.name ? ` name="${el.name}"` : ''}>`;
    for (const el of document.querySelectorAll('input, select, textarea')) {
      if (el.type === 'hidden' || !visible(el)) continue;
      const named = el.labels?.length > 0 || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby');
      if (!named) problems.push(`form control without a label: ${describe(el)}`);
    }
    for (const el of document.querySelectorAll('button, a[href]')) {
      if (!visible(el)) continue;
      const name = (el.getAttribute('aria-label') || el.textContent || '').trim();
      if (!name) problems.push(`control without an accessible name: ${describe(el)}`);
    }
    for (const el of document.querySelectorAll('img')) {
      if (!el.hasAttribute('alt')) problems.push(`image without alt: ${el.src}`);
    }
    const seen = new Map();
    for (const el of document.querySelectorAll('[id]')) seen.set(el.id, (seen.get(el.id) ?? 0) + 1);
    for (const [id, count] of seen) if (count > 1) problems.push(`id "${id}" used ${count} times`);
    for (const el of document.querySelectorAll('[aria-describedby]')) {
      for (const id of el.getAttribute('aria-describedby').split(/\s+/)) {
        if (id && !document.getElementById(id)) problems.push(`aria-describedby points at missing id "${id}" on ${describe(el)}`);
      }
    }
    if (!document.documentElement.lang) problems.push('<html> has no lang');
    if (document.querySelectorAll('h1').length !== 1) problems.push(`${document.querySelectorAll('h1').length} h1 elements (want 1)`);
    return problems;
  });
}

/** Text of the error shown beside a control: the element its aria-describedby names with class field-error. */
export async function errorBeside(locator) {
  return locator.evaluate((el) => {
    const ids = (el.getAttribute('aria-describedby') ?? '').split(/\s+/).filter(Boolean);
    const error = ids.map((id) => document.getElementById(id)).find((node) => node?.classList.contains('field-error') && !node.hidden);
    if (!error) return null;
    // "Beside": the error lives in the same field wrapper as the control.
    const sameField = el.closest('.field') === error.closest('.field');
    return { text: error.textContent, sameField, invalid: el.getAttribute('aria-invalid') === 'true' };
  });
}

/**
 * Text whose colour contrast against its background is below WCAG AA
 * (4.5:1, or 3:1 for large text). The background is the first opaque
 * background colour up the tree; disabled controls are exempt, as WCAG allows.
 */
export async function contrastProblems(page) {
  return page.evaluate(() => {
    const parse = (value) => {
      const m = value.match(/rgba?\(([^)]+)\)/);
      if (!m) return null;
      const [r, g, b, a = 1] = m[1].split(/[,\s/]+/).filter(Boolean).map(Number);
      return { r, g, b, a };
    };
    const luminance = ({ r, g, b }) => {
      const ch = (v) => {
        const c = v / 255;
        return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
      };
      return 0.2126 * ch(r) + 0.7152 * ch(g) + 0.0722 * ch(b);
    };
    const blend = (top, bottom) => ({
      r: top.r * top.a + bottom.r * (1 - top.a),
      g: top.g * top.a + bottom.g * (1 - top.a),
      b: top.b * top.a + bottom.b * (1 - top.a),
      a: 1,
    });
    const background = (el) => {
      const layers = [];
      for (let node = el; node; node = node.parentElement) {
        const bg = parse(getComputedStyle(node).backgroundColor);
        if (bg && bg.a > 0) {
          layers.push(bg);
          if (bg.a >= 1) break;
        }
      }
      let color = { r: 255, g: 255, b: 255, a: 1 };
      for (const layer of layers.reverse()) color = blend(layer, color);
      return color;
    };
    const problems = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const seen = new Set();
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
      const el = text.parentElement;
      if (!el || seen.has(el) || !text.textContent.trim()) continue;
      seen.add(el);
      if (el.closest('.visually-hidden, [hidden], noscript, option, [disabled]') || el.getClientRects().length === 0) continue;
      const style = getComputedStyle(el);
      if (style.visibility === 'hidden' || Number(style.opacity) === 0) continue;
      const fg = parse(style.color);
      const bg = background(el);
      const ratio = (a, b) => {
        const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
        return (hi + 0.05) / (lo + 0.05);
      };
      const actual = ratio(blend(fg, bg), bg);
      const size = parseFloat(style.fontSize);
      const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
      const needed = large ? 3 : 4.5;
      if (actual < needed) problems.push(`${actual.toFixed(2)}:1 < ${needed}:1 for "${text.textContent.trim().slice(0, 40)}"`);
    }
    return problems;
  });
}
