// tests/browser/report.test.js -- drives Debian's Chromium (puppeteer-core over the DevTools
// protocol) through dl.report's interactive pages, which tests/browser/fixtures.lua writes
// from the synthetic studies of tests/lua/report_fixtures.lua, and checks what a user would:
//   - every page loads from file:// with no console error or warning, no page error and no
//     request but the page itself (the watched page: only its sibling .watch.js);
//   - hovering over a curve shows a tooltip whose step, trials and values are those of the
//     trials' metrics.jsonl (read here, independently of the report's code);
//   - clicking a curve highlights the trial in the SVG plots, the legend and the trials table;
//   - the diverging trial is clipped (marked, not flattening the others), the one-eval study's
//     values are drawn per trial, pruned curves end at their rung, the "n/a" of a conditional
//     hyperparameter sits on its own band, no title is clipped, plots fill the window width;
//   - log y, smoothing and the legend toggles work;
//   - a watched study's open page reloads itself as trials finish and keeps the selection;
//   - a run dl.train wrote: every scalar series of its metrics.jsonl (read here) has an entry
//     in its group's picker that draws exactly those values; a watched run's page reloads as
//     the run logs and the watcher stops when result.json is written;
//   - the 200-trial report renders (the time is printed, not asserted).
//   node tests/browser/report.test.js MANIFEST.json [--screenshots DIR]
// Prints "browser: ok ..." and exits 0, or "browser: FAIL ..." lines and exits 1.
'use strict';
const fs = require('fs');
const path = require('path');
const {spawn} = require('child_process');
const puppeteer = require('puppeteer-core');

const manifest = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const shotDir = process.argv.indexOf('--screenshots') > 0 ? process.argv[process.argv.indexOf('--screenshots') + 1] : null;
const problems = [];
const notes = [];
function problem(name, msg) { problems.push(name + ': ' + msg); }
function check(name, cond, msg) { if (!cond) problem(name, msg); return !!cond; }

// metrics.jsonl of a trial: value of metric at step (train/X from the train lines), or undefined
const histories = {};
function metricAt(dir, metric, step) {
  if (!histories[dir]) {
    histories[dir] = fs.readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8').split('\n').filter(Boolean).map(JSON.parse);
  }
  const m = /^train\/(.+)$/.exec(metric);
  for (const e of histories[dir]) {
    if (e.step !== step) continue;
    if (m && e.split === 'train' && typeof e[m[1]] === 'number') return e[m[1]];
    if (!m && e.split === 'eval' && typeof e[metric] === 'number') return e[metric];
  }
  return undefined;
}

async function open(browser, page, width, opts = {}) {
  const tab = await browser.newPage();
  await tab.setViewport({width, height: 900});
  const log = {errors: [], requests: []};
  tab.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warn' || m.type() === 'warning') log.errors.push(m.type() + ': ' + m.text()); });
  tab.on('pageerror', (e) => log.errors.push('page error: ' + e.message));
  tab.on('requestfailed', (r) => log.errors.push('request failed: ' + r.url()));
  tab.on('request', (r) => log.requests.push(r.url()));
  const t0 = Date.now();
  await tab.goto('file://' + page, {waitUntil: 'load'});
  await tab.waitForFunction('window.dluaReport !== undefined', {timeout: 10000});
  log.loadMs = Date.now() - t0;
  log.renderMs = await tab.evaluate(() => window.dluaReadyMs);
  return {tab, log};
}

function checkClean(name, log, page, allowed) {
  for (const e of log.errors) problem(name, 'console/page: ' + e);
  for (const u of log.requests) {
    const plain = u.split('?')[0];
    if (plain === 'file://' + page) continue;
    if (allowed && allowed.some((a) => plain === 'file://' + a)) continue;
    problem(name, 'request other than the page: ' + u);
  }
}

// the page position of a curve point: plot index, series of trial id, x index
async function pointPos(tab, pi, id, xi) {
  return tab.evaluate((pi, id, xi) => {
    const p = window.dluaReport.plots[pi], u = p.u, T = window.DLUA.trials;
    const si = p.order.findIndex((t) => T[t].id === id) + 1;
    const r = u.over.getBoundingClientRect();
    const clamp = (v, lo, hi) => Math.max(lo + 1, Math.min(hi - 1, v));   // the plot's last step is on its right edge
    return {x: clamp(r.left + u.valToPos(u.data[0][xi], 'x'), r.left, r.right),
      y: clamp(r.top + u.valToPos(u.data[si][xi], 'y'), r.top, r.bottom), step: u.data[0][xi]};
  }, pi, id, xi);
}

// the point of a trial that other curves pass furthest from (the best trials first on ties), inside the plot
async function pick(tab, pi) {
  await tab.evaluate((pi) => window.dluaReport.plots[pi].fig.scrollIntoView({block: 'center'}), pi);
  return tab.evaluate((pi) => {
    const p = window.dluaReport.plots[pi], u = p.u, T = window.DLUA.trials, n = u.data[0].length;
    const order = p.order.map((t, k) => k + 1).sort((a, b) => (T[p.order[a - 1]].rank || 1e9) - (T[p.order[b - 1]].rank || 1e9));
    let best = null;
    for (const si of order) {
      for (let xi = 0; xi < n; xi++) {
        const v = u.data[si][xi];
        if (v == null || (n > 2 && (xi === 0 || xi === n - 1))) continue;
        const y = u.valToPos(v, 'y');
        if (y < 2 || y > u.over.clientHeight - 2) continue;
        let gap = 1e9;
        for (let sj = 1; sj < u.series.length; sj++) {
          if (sj !== si && u.data[sj][xi] != null) gap = Math.min(gap, Math.abs(u.valToPos(u.data[sj][xi], 'y') - y));
        }
        if (!best || gap > best.gap + 0.5) best = {id: T[p.order[si - 1]].id, xi, gap};
      }
    }
    return best;
  }, pi);
}

async function hoverCheck(name, tab, c, pi, id, xi, visibleIds) {
  await tab.evaluate((pi) => window.dluaReport.plots[pi].fig.scrollIntoView({block: 'center'}), pi);
  const pos = await pointPos(tab, pi, id, xi), p3 = pos;
  await tab.mouse.move(p3.x, p3.y);
  await tab.mouse.move(p3.x + 0.5, p3.y);
  const tip = await tab.evaluate(() => {
    const t = document.getElementById('tip');
    if (!t || t.style.display === 'none') return null;
    const head = t.querySelector('.tt-head');
    return {x: head && +head.getAttribute('data-x'), rows: [...t.querySelectorAll('.tt-row')].map((r) =>
      ({id: r.getAttribute('data-trial'), v: r.getAttribute('data-v'), text: r.querySelector('.tt-v').textContent}))};
  });
  if (!check(name, tip, `no tooltip when hovering ${id} at x=${pos.step} in ${c.metric}`)) return null;
  check(name, tip.x === pos.step, `tooltip is for x ${tip.x}, the cursor is at ${pos.step}`);
  // every trial with a value at that step in its metrics.jsonl, and only those
  const expect = {};
  for (const [tid, dir] of Object.entries(manifest.pages[name].trial_dirs)) {
    if (visibleIds && !visibleIds.includes(tid)) continue;
    const v = c.single ? undefined : metricAt(dir, c.metric, tip.x);
    if (v !== undefined) expect[tid] = v;
  }
  if (c.single) {          // one point per trial, x = the trial's number: the trial at x
    const T = manifest.pages[name].order;
    const tid = T[String(tip.x)];
    const dir = manifest.pages[name].trial_dirs[tid];
    const h = fs.readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8').split('\n').filter(Boolean).map(JSON.parse)
      .filter((e) => e.split === 'eval' && typeof e[c.metric] === 'number');
    expect[tid] = h[h.length - 1][c.metric];
  }
  const got = {};
  for (const r of tip.rows) got[r.id] = r;
  for (const [tid, v] of Object.entries(expect)) {
    if (!check(name, got[tid], `tooltip at x ${tip.x} of ${c.metric} misses ${tid} (value ${v} in its metrics.jsonl)`)) continue;
    check(name, Number(got[tid].v) === v, `tooltip value of ${tid} at x ${tip.x} is ${got[tid].v}, metrics.jsonl has ${v}`);
    check(name, Math.abs(Number(got[tid].text.split(' ')[0]) - v) <= 1e-4 * Math.max(1, Math.abs(v)),
      `tooltip shows ${got[tid].text} for ${tid}, metrics.jsonl has ${v}`);
  }
  for (const r of tip.rows) check(name, expect[r.id] !== undefined, `tooltip lists ${r.id}, which has no ${c.metric} at ${tip.x}`);
  return {tip, pos: p3};
}

async function clickCheck(name, tab, pi, id, xi) {
  await tab.evaluate((pi) => window.dluaReport.plots[pi].fig.scrollIntoView({block: 'center'}), pi);
  const pos = await pointPos(tab, pi, id, xi);
  await tab.mouse.click(pos.x, pos.y);
  const r = await tab.evaluate((id) => {
    const sel = window.dluaReport.state.sel;
    const row = document.querySelector(`#trials-table tr[data-trial="${CSS.escape(id)}"]`);
    const svgHl = [...document.querySelectorAll('svg.plot [data-trial].hl')].map((e) => e.getAttribute('data-trial'));
    const figs = [...new Set([...document.querySelectorAll('svg.plot [data-trial].hl')].map((e) => e.closest('figure').id))];
    const chip = document.querySelector(`#legend .chip[data-trial="${CSS.escape(id)}"]`);
    const others = document.querySelectorAll('#trials-table tr.hl').length;
    return {sel, row: row && row.classList.contains('hl'), svgHl, figs, chip: chip && chip.classList.contains('hl'), others,
      bar: document.getElementById('selection').textContent};
  }, id);
  check(name, r.sel === id, `clicking ${id}'s curve selected ${r.sel}`);
  check(name, r.row && r.others === 1, `the trials table row of ${id} is not the one highlighted`);
  check(name, r.chip, `the legend entry of ${id} is not highlighted`);
  check(name, r.svgHl.length > 0 && r.svgHl.every((x) => x === id), `SVG marks highlighted: ${JSON.stringify(r.svgHl)}`);
  check(name, r.bar.includes(id), `the selection bar says "${r.bar}"`);
  return r;
}

// drag zooms x and y, a double click resets, the wheel zooms x around the cursor, shift+drag pans
async function zoomCheck(name, tab, pi) {
  await tab.evaluate((pi) => window.dluaReport.plots[pi].fig.scrollIntoView({block: 'center'}), pi);
  const sc = () => tab.evaluate((pi) => { const u = window.dluaReport.plots[pi].u; return [u.scales.x.min, u.scales.x.max, u.scales.y.min, u.scales.y.max]; }, pi);
  const r = await tab.evaluate((pi) => { const b = window.dluaReport.plots[pi].u.over.getBoundingClientRect(); return [b.left, b.top, b.width, b.height]; }, pi);
  const at = (fx, fy) => [r[0] + r[2] * fx, r[1] + r[3] * fy];
  const s0 = await sc();
  await tab.mouse.move(...at(0.3, 0.3)); await tab.mouse.down(); await tab.mouse.move(...at(0.6, 0.7), {steps: 5}); await tab.mouse.up();
  const s1 = await sc();
  check(name, s1[1] - s1[0] < 0.5 * (s0[1] - s0[0]) && s1[3] - s1[2] < 0.6 * (s0[3] - s0[2]), `drag-zoom: ${JSON.stringify(s0)} -> ${JSON.stringify(s1)}`);
  await tab.mouse.click(...at(0.5, 0.5), {clickCount: 2});
  const s2 = await sc();
  check(name, JSON.stringify(s2) === JSON.stringify(s0), `double click did not reset the zoom: ${JSON.stringify(s2)}`);
  await tab.mouse.move(...at(0.5, 0.5)); await tab.mouse.wheel({deltaY: -100});
  await new Promise((res) => setTimeout(res, 100));
  const s3 = await sc();
  check(name, s3[1] - s3[0] < 0.9 * (s0[1] - s0[0]) && s3[0] > s0[0], `wheel zoom: ${JSON.stringify(s0)} -> ${JSON.stringify(s3)}`);
  await tab.keyboard.down('Shift'); await tab.mouse.down(); await tab.mouse.move(...at(0.3, 0.5), {steps: 5}); await tab.mouse.up();
  await tab.keyboard.up('Shift');
  const s4 = await sc();
  check(name, s4[0] > s3[0] && Math.abs((s4[1] - s4[0]) - (s3[1] - s3[0])) < 1e-6 * (s3[1] - s3[0]) + 1e-9, `shift+drag pan: ${JSON.stringify(s3)} -> ${JSON.stringify(s4)}`);
  await tab.mouse.click(...at(0.5, 0.5), {clickCount: 2});
  await tab.evaluate(() => window.dluaReport.select(null));
}

// layout: no clipped title, plots fill the width, n/a clear of the ticks
async function layoutCheck(name, tab, width) {
  const r = await tab.evaluate(() => {
    const out = {clipped: [], overlaps: [], rowWidth: 0, figs: 0};
    for (const t of document.querySelectorAll('svg.plot text.title')) {
      const b = t.getBoundingClientRect(), s = t.ownerSVGElement.getBoundingClientRect();
      if (b.left < s.left - 1 || b.right > s.right + 1) out.clipped.push(t.textContent);
    }
    for (const t of document.querySelectorAll('.fig-title')) if (t.scrollWidth > t.clientWidth + 1) out.clipped.push(t.textContent);
    const na = [...document.querySelectorAll('#parallel text.na')], ticks = [...document.querySelectorAll('#parallel text.tick:not(.na)')];
    for (const a of na) {
      const x = a.getBoundingClientRect();
      for (const t of ticks) {
        const y = t.getBoundingClientRect();
        if (x.left < y.right && y.left < x.right && x.top < y.bottom && y.top < x.bottom) out.overlaps.push(t.textContent);
      }
    }
    out.na = na.length;
    const grid = document.getElementById('curve-grid');
    if (grid) {
      const figs = [...grid.children], top = figs[0].getBoundingClientRect().top;
      let right = 0;
      for (const f of figs) { const b = f.getBoundingClientRect(); if (Math.abs(b.top - top) < 2) right = Math.max(right, b.right); }
      out.rowWidth = right - figs[0].getBoundingClientRect().left;
      out.figs = figs.length;
    }
    out.scrollX = document.documentElement.scrollWidth - window.innerWidth;
    return out;
  });
  check(name, r.clipped.length === 0, `clipped titles at ${width} px: ${JSON.stringify(r.clipped)}`);
  check(name, r.overlaps.length === 0, `"n/a" overlaps tick labels ${JSON.stringify(r.overlaps)}`);
  check(name, r.rowWidth >= 0.85 * (width - 60), `the curve plots use ${Math.round(r.rowWidth)} px of a ${width} px window`);
  check(name, r.scrollX <= 1, `the page scrolls sideways by ${r.scrollX} px at ${width} px`);
  return r;
}

async function studyPage(browser, name) {
  const P = manifest.pages[name];
  const {tab, log} = await open(browser, P.page, 1400);
  checkClean(name, log, P.page);
  const D = await tab.evaluate(() => ({curves: window.DLUA.curves.map((c) => ({metric: c.metric, single: c.single, x: c.x,
    series: c.series.map((s) => ({t: s.t, n: s.y.filter((v) => v != null).length, last: (() => { let k = -1; s.y.forEach((v, i) => { if (v != null) k = i; }); return k; })()})),
    clipped: c.clipped, lo: c.lo, hi: c.hi})), trials: window.DLUA.trials.map((t) => ({id: t.id, pruned: t.pruned, rung: t.rung, best: t.best}))}));
  check(name, D.curves.length >= 1, 'no curve plot');
  await layoutCheck(name, tab, 1400);
  // hover and click on the objective's plot: a trial of the best three and one of the others
  const pi = Math.min(1, D.curves.length - 1), c = D.curves[pi];
  const {id, xi} = await pick(tab, pi);
  await hoverCheck(name, tab, c, pi, id, xi);
  if (!c.single) {                                  // a step in the middle too
    const mid = c.series[0].last > 1 ? Math.floor(c.series[0].last / 2) : 0;
    await hoverCheck(name, tab, c, pi, D.trials[c.series[0].t].id, mid);
  }
  await clickCheck(name, tab, pi, id, xi);
  await zoomCheck(name, tab, pi);
  // a click on a table row selects that trial in the curves too
  const rowId = await tab.evaluate((id) => [...document.querySelectorAll('#trials-table tr[data-trial]')]
    .map((r) => r.getAttribute('data-trial')).find((t) => t !== id), id);
  if (rowId) {
    await tab.evaluate((t) => document.querySelector(`#trials-table tr[data-trial="${CSS.escape(t)}"]`).scrollIntoView({block: 'center'}), rowId);
    await tab.click(`#trials-table tr[data-trial="${rowId}"] td`);
    const a = await tab.evaluate((t) => ({sel: window.dluaReport.state.sel, alpha: window.dluaReport.plots.map((p) =>
      p.u.series.slice(1).map((s, i) => [window.DLUA.trials[p.order[i]].id, s.alpha]))}), rowId);
    check(name, a.sel === rowId, `clicking the table row of ${rowId} selected ${a.sel}`);
    const wrong = a.alpha.flat().filter(([t, al]) => (t === rowId) !== (al === 1));
    check(name, wrong.length === 0, `after selecting ${rowId} in the table, curves dimmed wrongly: ${JSON.stringify(wrong.slice(0, 3))}`);
    await tab.evaluate(() => window.dluaReport.select(null));
  }
  for (const [ck, want] of Object.entries(P.expect || {})) {
    if (ck === 'clipped') {                          // the diverging trial is clipped, the others keep their range
      const ci = D.curves.findIndex((q) => q.metric === 'train/loss');
      const cc = D.curves[ci];
      const ids = cc.clipped.map((t) => D.trials[t].id);
      check(name, JSON.stringify(ids) === JSON.stringify(want), `train/loss clips ${JSON.stringify(ids)}, expected ${JSON.stringify(want)}`);
      const y = await tab.evaluate((ci) => { const u = window.dluaReport.plots[ci].u; return {min: u.scales.y.min, max: u.scales.y.max}; }, ci);
      check(name, y.max < 4 && y.max > 2.2, `train/loss y-range tops at ${y.max}, expected just above the others' start (2.3)`);
      const cap = await tab.evaluate((ci) => window.dluaReport.plots[ci].fig.querySelector('figcaption').textContent, ci);
      check(name, want.every((w) => cap.includes(w)) && cap.includes('clipped'), `the caption does not name the clipped trial: ${cap}`);
      await tab.click('#ctl-clip');
      const y2 = await tab.evaluate((ci) => window.dluaReport.plots[ci].u.scales.y.max, ci);
      check(name, y2 >= 15, `without clipping the y-range tops at ${y2}, the diverging trial reaches 15`);
      await tab.click('#ctl-clip');
    } else if (ck === 'pruned') {                    // pruned curves end at their rung
      const ci = D.curves.findIndex((q) => q.metric === P.metric);
      const cc = D.curves[ci];
      for (const [tid, rung] of Object.entries(want)) {
        const q = cc.series.find((z) => D.trials[z.t].id === tid);
        check(name, q && cc.x[q.last] === rung, `pruned ${tid} ends at ${q && cc.x[q.last]}, its rung is ${rung}`);
      }
      const n = await tab.evaluate(() => document.querySelectorAll('#pruned path.rung').length);
      check(name, n === Object.keys(want).length, `the pruned view has ${n} rung marks, expected ${Object.keys(want).length}`);
    } else if (ck === 'single') {                    // one eval per trial: points against the trial number
      const cc = D.curves.find((q) => q.metric === P.metric);
      check(name, cc.single && cc.x[0] >= 1 && cc.x[cc.x.length - 1] === want, `the one-eval plot's x runs ${cc.x[0]}..${cc.x[cc.x.length - 1]}, expected 1..${want}`);
    } else if (ck === 'na') {                        // inactive momentum values on the n/a band
      const r = await tab.evaluate(() => {
        const band = document.querySelector('#parallel rect.na-band').getBoundingClientRect();
        return {band: band.height, na: document.querySelectorAll('#parallel text.na').length};
      });
      check(name, r.band > 0 && r.na === want, `parallel coordinates: ${r.na} n/a labels (expected ${want}), band ${r.band}`);
    }
  }
  // log y, smoothing and a legend toggle
  await tab.click('#ctl-log');
  const distr = await tab.evaluate(() => window.dluaReport.plots.map((p) => p.u.scales.y.distr));
  check(name, distr.every((d) => d === 3), `log y: scales ${JSON.stringify(distr)}`);
  await tab.click('#ctl-log');
  await tab.evaluate(() => { const s = document.getElementById('ctl-smooth'); s.value = '0.6'; s.dispatchEvent(new Event('input')); });
  if (!c.single) {
    const sm = await tab.evaluate((pi) => { const p = window.dluaReport.plots[pi]; return {a: p.u.data[1], raw: p.spec.series[p.sidx[0]].y}; }, pi);
    check(name, JSON.stringify(sm.a) !== JSON.stringify(sm.raw), 'smoothing left the curve unchanged');
  }
  await tab.evaluate(() => { const s = document.getElementById('ctl-smooth'); s.value = '0'; s.dispatchEvent(new Event('input')); });
  await tab.click(`#legend input[data-show="${id}"]`);
  const shown = await tab.evaluate((id) => window.dluaReport.plots.map((p) => p.u.series[p.order.findIndex((t) => window.DLUA.trials[t].id === id) + 1]).map((s) => s ? s.show : null), id);
  check(name, shown.every((v) => v === false || v === null), `hiding ${id} in the legend left it shown: ${JSON.stringify(shown)}`);
  const visible = Object.keys(P.trial_dirs).filter((t) => t !== id);
  const other = c.series.find((q) => D.trials[q.t].id !== id && q.n > 0);
  if (other) {
    const h = await hoverCheck(name, tab, c, pi, D.trials[other.t].id, other.last, visible);
    if (h) check(name, !h.tip.rows.some((r) => r.id === id), `the hidden ${id} is still in the tooltip`);
  }
  await tab.click(`#legend input[data-show="${id}"]`);
  if (P.series) await seriesCheck(name, tab, P);
  checkClean(name, log, P.page);
  if (shotDir && P.screenshot) {
    // the top of the page (diagnosis, curves, history, pruned, axis plots) with the best trial
    // selected, at both widths; at 1400 px also the curves with a tooltip
    for (const w of [1400, 800]) {
      await tab.setViewport({width: w, height: 900});
      await new Promise((r) => setTimeout(r, 300));
      if (w === 800) await layoutCheck(name, tab, 800);
      const best = D.trials.find((t) => t.best).id;
      await tab.evaluate((id) => { window.dluaReport.select(id); window.scrollTo(0, 0); }, best);
      const height = await tab.evaluate(() => document.documentElement.scrollHeight);
      const file = path.join(shotDir, `${P.screenshot}-${w}.png`);
      await tab.screenshot({path: file, clip: {x: 0, y: 0, width: w, height: Math.min(height, 2600)}, captureBeyondViewport: true});
      notes.push('screenshot ' + file);
    }
    await tab.setViewport({width: 1400, height: 1000});
    await tab.evaluate(() => window.dluaReport.select(null));
    const {id: hid, xi: hxi} = await pick(tab, pi);
    await tab.evaluate(() => window.scrollTo(0, document.getElementById('curves').getBoundingClientRect().top + window.scrollY - 8));
    const hp = await pointPos(tab, pi, hid, hxi);
    await tab.mouse.move(hp.x, hp.y);
    const file = path.join(shotDir, `${P.screenshot}-hover.png`);
    await tab.screenshot({path: file, captureBeyondViewport: false});          // the viewport: the tooltip is fixed
    notes.push('screenshot ' + file);
  }
  await tab.close();
}

// the scalar series of a metrics.jsonl as the report names them, read independently:
// {name: {step: value}}
function loggedSeries(dir) {
  const out = {};
  const add = (n, step, v) => { if (Number.isFinite(v)) (out[n] = out[n] || {})[step] = v; };
  for (const e of fs.readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8').split('\n').filter(Boolean).map(JSON.parse)) {
    for (const [k, v] of Object.entries(e)) {
      if (k === 'step' || k === 'split' || k === 'elapsed') continue;
      if (typeof v === 'number') add(e.split === 'train' && !k.includes('/') ? 'train/' + k : k, e.step, v);
      else if (v && Array.isArray(v.total)) v.total.forEach((n, i) => { if (n > 0) add(`${k}/${i + 1}`, e.step, v.correct[i] / n); });
    }
  }
  return out;
}

// every logged series has an entry in a group's picker; picking it draws its values
async function seriesCheck(name, tab, P) {
  const want = loggedSeries(P.dir);
  const names = Object.keys(want).sort();
  const opts = await tab.evaluate(() => [...document.querySelectorAll('#series-grid figure')].map((f) =>
    [...f.querySelectorAll('select option')].map((o) => [f.id, o.value])).flat());
  const where = Object.fromEntries(opts.map(([g, v]) => [v, g]));
  const missing = names.filter((n) => !where[n]);
  check(name, missing.length === 0, `logged series with no entry in the page: ${JSON.stringify(missing)}`);
  check(name, opts.length === names.length, `the pickers list ${opts.length} series, metrics.jsonl has ${names.length}`);
  for (const want_group of ['train', 'lr', 'valid', 'test', 'ema', 'per-class']) {
    check(name, opts.some(([g]) => g === 'group-' + want_group), `no group ${want_group}: ${JSON.stringify([...new Set(opts.map(([g]) => g))])}`);
  }
  let drawn = 0;
  for (const n of names) {
    if (!where[n]) continue;
    await tab.select(`#${where[n]} select`, n);
    const r = await tab.evaluate((gid) => {
      const p = window.dluaReport.plots.find((q) => q.fig.id === gid), u = p.u;
      const canvas = p.host.querySelector('canvas');
      return {metric: p.spec.metric, x: u.data[0], y: u.data[1], show: u.series[1] && u.series[1].show,
        w: canvas ? canvas.width : 0, title: p.fig.querySelector('select').selectedOptions[0].textContent};
    }, where[n]);
    const steps = Object.keys(want[n]).map(Number);
    const got = {};
    r.x.forEach((x, i) => { if (r.y[i] != null) got[x] = r.y[i]; });
    const wrong = steps.filter((st) => got[st] !== want[n][st]);
    if (check(name, r.metric === n && r.show && r.w > 0, `picking ${n} drew ${r.metric} (shown ${r.show}, canvas ${r.w} px)`) &&
        check(name, wrong.length === 0 && Object.keys(got).length === steps.length,
          `${n}: the plot has ${Object.keys(got).length} points, metrics.jsonl ${steps.length}; differs at steps ${JSON.stringify(wrong.slice(0, 5))}`)) drawn++;
  }
  notes.push(`${name}: ${drawn} of ${names.length} logged series drawn from the pickers (values as in metrics.jsonl)`);
}

async function runWatchPage(browser, name) {
  const P = manifest.pages[name];
  const child = spawn(manifest.dlua, ['recipes/report.lua', P.dir, '--watch', '--interval', '0.3', '--timeout', '60'],
    {cwd: manifest.root, stdio: ['ignore', 'pipe', 'pipe']});
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const exited = new Promise((res) => child.on('exit', (code) => res(code)));
  for (let i = 0; i < 100 && !fs.existsSync(P.page + '.watch.js'); i++) await new Promise((r) => setTimeout(r, 100));
  if (!check(name, fs.existsSync(P.page + '.watch.js'), 'the watcher wrote no .watch.js: ' + out)) { child.kill(); return; }
  const {tab, log} = await open(browser, P.page, 1400);
  const n0 = await tab.evaluate(() => window.DLUA.series.curves['train/loss'].x.length);
  // the run logs the rest of its lines
  fs.writeFileSync(path.join(P.dir, 'metrics.jsonl'), fs.readFileSync(P.full_metrics));
  try {
    await tab.waitForFunction((n0) => window.DLUA && window.dluaReport && window.DLUA.series.curves['train/loss'].x.length > n0,
      {timeout: 15000}, n0);
  } catch (e) { problem(name, 'the open page did not reload after the run logged: ' + out); }
  const n1 = await tab.evaluate(() => window.DLUA.series.curves['train/loss'].x.length);
  check(name, n1 === Object.keys(loggedSeries(P.dir)['train/loss']).length, `after the reload train/loss has ${n1} points`);
  const early = await Promise.race([exited, new Promise((r) => setTimeout(() => r('running'), 1000))]);
  check(name, early === 'running', `the watcher stopped (${early}) before result.json was written: ${out}`);
  fs.writeFileSync(path.join(P.dir, 'result.json'), fs.readFileSync(P.full_result));      // the run ends
  const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 15000))]);
  check(name, code === 0, `the watcher exited with ${code}: ${out}`);
  check(name, /finished/.test(out), 'the watcher printed: ' + out);
  if (code === 'timeout') child.kill();
  try {
    await tab.waitForFunction(() => /the run is finished/.test((document.getElementById('watching') || {}).textContent || ''),
      {timeout: 15000});
  } catch (e) { problem(name, 'the page does not say the run is finished'); }
  checkClean(name, log, P.page, [P.page + '.watch.js']);
  notes.push(`${name}: reloaded from ${n0} to ${n1} train/loss points, the watcher stopped at result.json`);
  await tab.close();
}

async function timing(browser, name) {
  const P = manifest.pages[name];
  const runs = [];
  for (let i = 0; i < 3; i++) {
    const {tab, log} = await open(browser, P.page, 1400);
    checkClean(name, log, P.page);
    runs.push({load: log.loadMs, render: log.renderMs});
    await tab.close();
  }
  runs.sort((a, b) => a.load - b.load);
  const m = runs[1];
  const size = fs.statSync(P.page).size;
  notes.push(`${name}: ${P.trials} trials, ${(size / 1e6).toFixed(2)} MB page, load event + report ready ${m.load} ms (median of 3), ` +
    `script done ${Math.round(m.render)} ms after navigation start`);
  console.log(`browser: timing ${name} ${P.trials} trials: ${m.load} ms to ready (script ${Math.round(m.render)} ms), page ${size} bytes`);
}

async function watchPage(browser, name) {
  const P = manifest.pages[name];
  const child = spawn(manifest.dlua, ['recipes/report.lua', P.dir, '--watch', '--interval', '0.3', '--timeout', '60'],
    {cwd: manifest.root, stdio: ['ignore', 'pipe', 'pipe']});
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const exited = new Promise((res) => child.on('exit', (code) => res(code)));
  for (let i = 0; i < 100 && !fs.existsSync(P.page + '.watch.js'); i++) await new Promise((r) => setTimeout(r, 100));
  if (!check(name, fs.existsSync(P.page + '.watch.js'), 'the watcher wrote no .watch.js: ' + out)) { child.kill(); return; }
  const {tab, log} = await open(browser, P.page, 1400);
  const n0 = await tab.evaluate(() => window.DLUA.trials.length);
  const first = await tab.evaluate(() => window.DLUA.trials[0].id);
  await tab.evaluate((id) => window.dluaReport.select(id), first);
  // more trials finish: the rest of the journal
  fs.writeFileSync(path.join(P.dir, 'journal.jsonl'), fs.readFileSync(P.full_journal));
  try {
    await tab.waitForFunction((n0) => window.DLUA && window.DLUA.trials.length > n0 && window.dluaReport, {timeout: 15000}, n0);
  } catch (e) { problem(name, 'the open page did not reload after trials finished: ' + out); }
  const after = await tab.evaluate(() => ({n: window.DLUA.trials.length, sel: window.dluaReport.state.sel,
    row: !!document.querySelector('#trials-table tr.hl')}));
  check(name, after.n === P.trials_after, `after the reload the page has ${after.n} trials, expected ${P.trials_after}`);
  check(name, after.sel === first && after.row, `the selection did not survive the reload (${after.sel})`);
  fs.writeFileSync(path.join(P.dir, 'results.json'), '{}\n');        // the study is complete: the watcher stops
  const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 15000))]);
  check(name, code === 0, `the watcher exited with ${code}: ${out}`);
  check(name, /update 1\b/.test(out) && /finished/.test(out), 'the watcher printed: ' + out);
  if (code === 'timeout') child.kill();
  checkClean(name, log, P.page, [P.page + '.watch.js']);
  notes.push(`${name}: reloaded from ${n0} to ${after.n} trials, selection kept`);
  await tab.close();
}

(async () => {
  const browser = await puppeteer.launch({executablePath: manifest.chromium, headless: true,
    args: ['--no-sandbox', '--disable-gpu']});
  try {
    for (const [name, P] of Object.entries(manifest.pages)) {
      try {
        if (P.kind === 'timing') await timing(browser, name);
        else if (P.kind === 'watch') await watchPage(browser, name);
        else if (P.kind === 'runwatch') await runWatchPage(browser, name);
        else await studyPage(browser, name);
      } catch (e) { problem(name, 'exception: ' + (e && e.stack || e)); }
    }
  } finally { await browser.close(); }
  for (const n of notes) console.log('browser: ' + n);
  if (problems.length) { for (const p of problems) console.log('browser: FAIL ' + p); process.exit(1); }
  console.log(`browser: ok (${Object.keys(manifest.pages).length} pages: hover values, click highlight, clipping, pruned, ` +
    'one eval per trial, n/a band, titles, width, log y, smoothing, legend, watch reload, every series of a run, ' +
    'a watched run)');
})();
