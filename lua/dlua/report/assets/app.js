/* dlua interactive report (lua/dlua/report/assets/app.js), inlined into report.html by
 * lua/dlua/report/html.lua after uPlot. Reads window.DLUA (dlua.report.data) and draws:
 *  - one uPlot per curve plot: hover tooltip with every visible trial's value at the step,
 *    drag to zoom (x and y), wheel to zoom x, shift+drag to pan, double click to reset,
 *    log-y, smoothing (EMA, debiased), robust y-range with the clipped trials marked;
 *  - a shared legend: the checkbox shows or hides a trial in every plot;
 *  - selection: clicking a curve, a point or line of an SVG plot, a table row or a legend
 *    name highlights that trial in every plot and in the trials table;
 *  - every logged series (D.series): one plot per group of series, drawing the series picked
 *    in the group's select (the pick survives reloads);
 *  - watching (window.DLUA_WATCH): polls a sibling script the watcher rewrites and reloads
 *    the page when it changed, keeping the selection, toggles and scroll position.
 * Nothing is fetched but that sibling file (watch mode only). */
(function () {
  'use strict';
  var D = window.DLUA, T = D.trials, W = window.DLUA_WATCH;
  var S = D.series || {groups: [], curves: {}};
  var state = {log: false, clip: true, smooth: 0, hidden: {}, sel: null, pick: {}};
  var plots = [];
  var tip = document.getElementById('tip');

  // the state survives the watcher's reloads in window.name (works from file://)
  var saved = null;
  try {
    if (window.name.indexOf('dlua-report:') === 0) saved = JSON.parse(window.name.slice(12));
  } catch (e) { saved = null; }
  if (saved && saved.path === location.pathname) {
    state.log = !!saved.log; state.clip = saved.clip !== false; state.smooth = +saved.smooth || 0;
    state.hidden = saved.hidden || {}; state.sel = saved.sel || null; state.pick = saved.pick || {};
  }
  function save() {
    window.name = 'dlua-report:' + JSON.stringify({path: location.pathname, log: state.log, clip: state.clip,
      smooth: state.smooth, hidden: state.hidden, sel: state.sel, pick: state.pick, y: window.scrollY});
  }

  var byId = {};
  T.forEach(function (t, i) { byId[t.id] = i; });
  function isMin(metric) { return /(loss|error)$/.test(metric); }
  function fmt(v) {
    if (v == null || !isFinite(v)) return String(v);
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(3);
    return String(+v.toPrecision(5));
  }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
    });
  }
  function smooth(y, w) {
    if (!w) return y;
    var out = new Array(y.length), last = 0, n = 0;
    for (var i = 0; i < y.length; i++) {
      if (y[i] == null) { out[i] = null; continue; }
      last = last * w + (1 - w) * y[i]; n++;
      out[i] = last / (1 - Math.pow(w, n));
    }
    return out;
  }
  function lastIdx(y) { for (var i = y.length - 1; i >= 0; i--) if (y[i] != null) return i; return -1; }
  function count(y) { var n = 0; for (var i = 0; i < y.length; i++) if (y[i] != null) n++; return n; }

  // ------------------------------------------------------------------ curve plots

  function yRange(p) {
    return function (u, mn, mx) {
      if (mn == null || mx == null) return [0, 1];
      var spec = p.spec, lo = mn, hi = mx;
      if (state.clip && spec.lo != null && !spec.single) { lo = Math.max(mn, spec.lo); hi = Math.min(mx, spec.hi); }
      if (hi < lo) { lo = mn; hi = mx; }
      if (state.log) {
        lo = Math.max(lo, spec.minpos || 1e-12); hi = Math.max(hi, lo * 1.0001);
        return [lo / Math.pow(hi / lo, 0.04), hi * Math.pow(hi / lo, 0.04)];
      }
      var pad = (hi - lo) * 0.05 || Math.abs(hi) * 0.05 || 1;
      return [lo - pad, hi + pad];
    };
  }

  function drawMarks(p) {
    return function (u) {
      var ctx = u.ctx, spec = p.spec, px = window.devicePixelRatio || 1, b = u.bbox;
      ctx.save();
      ctx.beginPath(); ctx.rect(b.left, b.top - 8 * px, b.width, b.height + 16 * px); ctx.clip();
      // the selected trial again, on top of the others
      for (var i = 1; i < u.series.length; i++) {
        var s = u.series[i], t = T[p.order[i - 1]];
        if (t.id === state.sel && s.show && s._paths && s._paths.stroke && !spec.single) {
          ctx.lineWidth = 3.5 * px; ctx.strokeStyle = t.best ? t.color : '#000'; ctx.globalAlpha = 1;
          ctx.stroke(s._paths.stroke);
        }
      }
      for (var j = 1; j < u.series.length; j++) {
        var sj = u.series[j], tj = T[p.order[j - 1]];
        if (!sj.show) continue;
        var y = u.data[j];
        ctx.globalAlpha = state.sel == null || state.sel === tj.id ? 1 : 0.25;
        if (tj.pruned && !spec.single) {                    // pruned: a cross where the curve ends (its rung)
          var k = lastIdx(y);
          if (k >= 0) {
            var X = u.valToPos(u.data[0][k], 'x', true), Y = u.valToPos(y[k], 'y', true), r = 4 * px;
            ctx.strokeStyle = '#d46b00'; ctx.lineWidth = 2 * px; ctx.beginPath();
            ctx.moveTo(X - r, Y - r); ctx.lineTo(X + r, Y + r); ctx.moveTo(X - r, Y + r); ctx.lineTo(X + r, Y - r); ctx.stroke();
          }
        }
        if (p.clippedSet[p.order[j - 1]] && state.clip) {    // clipped: a red triangle at the edge it leaves by
          var sc = u.scales.y;
          for (var m = 0; m < y.length; m++) {
            if (y[m] == null || (y[m] <= sc.max && y[m] >= sc.min)) continue;
            var up = y[m] > sc.max, Xm = u.valToPos(u.data[0][m], 'x', true);
            var Ym = up ? b.top + 1 * px : b.top + b.height - 1 * px, h = 7 * px;
            ctx.fillStyle = '#d62728'; ctx.globalAlpha = 1; ctx.beginPath();
            ctx.moveTo(Xm, up ? Ym : Ym); ctx.lineTo(Xm - h * 0.6, up ? Ym + h : Ym - h); ctx.lineTo(Xm + h * 0.6, up ? Ym + h : Ym - h);
            ctx.closePath(); ctx.fill();
            break;
          }
        }
      }
      ctx.restore();
    };
  }

  function showTip(p) {
    return function (u) {
      var idx = u.cursor.idx;
      if (idx == null || u.cursor.left == null || u.cursor.left < 0 || !p.hover) { tip.style.display = 'none'; return; }
      var spec = p.spec, rows = [];
      for (var i = 1; i < u.series.length; i++) {
        if (!u.series[i].show) continue;
        var v = u.data[i][idx];
        if (v == null) continue;
        var t = T[p.order[i - 1]];
        rows.push({t: t, v: v, raw: spec.series[p.sidx[i - 1]].y[idx]});
      }
      var min = isMin(spec.metric);
      rows.sort(function (a, b) { return min ? a.v - b.v : b.v - a.v; });
      var x = u.data[0][idx], head = spec.single ? 'trial #' + x : 'step ' + x;
      var html = '<div class="tt-head" data-x="' + x + '">' + esc(spec.metric) + ' at ' + head + ' (' + rows.length +
        ' trial' + (rows.length === 1 ? '' : 's') + (state.smooth && !spec.single ? ', smoothed' : '') + ')</div>';
      var per = Math.max(1, Math.min(rows.length, 24));
      html += '<div class="tt-rows" style="grid-template-rows:repeat(' + per + ',auto)">';
      rows.forEach(function (r) {
        html += '<div class="tt-row' + (r.t.id === state.sel ? ' hl' : '') + '" data-trial="' + esc(r.t.id) + '" data-v="' +
          r.raw + '"><span class="sw" style="background:' + r.t.color + '"></span>' + esc(r.t.id) +
          (r.t.pruned ? ' (pruned)' : '') + '<span class="tt-v">' + fmt(r.raw) +
          (state.smooth && !spec.single ? ' (' + fmt(r.v) + ')' : '') + '</span></div>';
      });
      tip.innerHTML = html + '</div>';
      tip.style.display = rows.length ? 'block' : 'none';
      var r0 = u.over.getBoundingClientRect(), tw = tip.offsetWidth, th = tip.offsetHeight;
      var lx = r0.left + u.cursor.left + 14, ly = r0.top + u.cursor.top + 14;
      if (lx + tw > window.innerWidth - 4) lx = Math.max(4, r0.left + u.cursor.left - tw - 14);
      if (ly + th > window.innerHeight - 4) ly = Math.max(4, window.innerHeight - th - 4);
      tip.style.left = lx + 'px'; tip.style.top = ly + 'px';
    };
  }

  // the trial whose curve passes nearest the cursor (within 24 px), or null
  function nearest(p) {
    var u = p.u, idx = u.cursor.idx, best = null, bd = 24;
    if (idx == null) return null;
    for (var i = 1; i < u.series.length; i++) {
      if (!u.series[i].show || u.data[i][idx] == null) continue;
      var d = Math.abs(u.valToPos(u.data[i][idx], 'y') - u.cursor.top);
      if (d < bd) { bd = d; best = T[p.order[i - 1]].id; }
    }
    return best;
  }

  function plotHeight(w) { return Math.round(Math.max(280, Math.min(420, w * 0.72))); }

  function build(p) {
    var spec = p.spec, host = p.host;
    // grey first, the best on top (drawn last)
    var idxs = spec.series.map(function (s, k) { return k; });
    idxs.sort(function (a, b) {
      var ta = T[spec.series[a].t], tb = T[spec.series[b].t];
      var ka = ta.best ? 1e6 - ta.rank : (ta.feasible ? 0 : -1), kb = tb.best ? 1e6 - tb.rank : (tb.feasible ? 0 : -1);
      return ka - kb || spec.series[a].t - spec.series[b].t;
    });
    p.sidx = idxs; p.order = idxs.map(function (k) { return spec.series[k].t; });
    p.clippedSet = {};
    spec.clipped.forEach(function (t) { p.clippedSet[t] = true; });
    var data = [spec.x], series = [{label: spec.xlabel}];
    idxs.forEach(function (k) {
      var s = spec.series[k], t = T[s.t], lone = spec.single || count(s.y) === 1;
      data.push(spec.single ? s.y : smooth(s.y, state.smooth));
      series.push({label: t.id, stroke: t.color, width: t.best ? 2 : 1, show: !state.hidden[t.id], spanGaps: true,
        dash: t.pruned ? [5, 3] : (t.feasible || t.status === 'done' ? undefined : [2, 2]),
        alpha: state.sel == null || state.sel === t.id ? 1 : 0.25,
        points: {show: lone, size: spec.single ? 8 : 5, fill: t.color, stroke: t.id === state.sel ? '#000' : t.color},
        paths: spec.single ? function () { return null; } : undefined});
    });
    var w = Math.max(200, host.clientWidth), h = plotHeight(w);
    var opts = {width: w, height: h, series: series, legend: {show: false},
      cursor: {drag: {x: true, y: true, uni: 24}, points: {show: false}},
      scales: {x: {time: false}, y: {distr: state.log ? 3 : 1, range: yRange(p)}},
      axes: [{label: spec.xlabel, size: 44}, {label: spec.metric + (state.log ? ' (log)' : ''), size: 64,
        values: function (u, vals) { return vals.map(fmt); }}],
      hooks: {setCursor: [showTip(p)], draw: [drawMarks(p)]}};
    if (spec.single) {
      var x0 = spec.x[0], x1 = spec.x[spec.x.length - 1];     // half a trial of room at the ends; a zoom as asked
      opts.scales.x.range = function (u, mn, mx) { return mn === x0 && mx === x1 ? [mn - 0.5, mx + 0.5] : [mn, mx]; };
    }
    if (p.u) p.u.destroy();
    p.u = new uPlot(opts, data, host);
    var over = p.u.over, down = null;
    over.addEventListener('mouseenter', function () { p.hover = true; });
    over.addEventListener('mouseleave', function () { p.hover = false; tip.style.display = 'none'; });
    over.addEventListener('mousedown', function (e) {
      down = {x: e.clientX, y: e.clientY};
      if (e.shiftKey) { e.stopPropagation(); pan(p, e); }
    }, true);
    over.addEventListener('click', function (e) {
      if (!down || Math.abs(e.clientX - down.x) > 3 || Math.abs(e.clientY - down.y) > 3) return;
      var id = nearest(p);
      select(id === state.sel ? null : id);
    });
    over.addEventListener('wheel', function (e) {
      e.preventDefault();
      var u = p.u, sx = u.scales.x, f = e.deltaY < 0 ? 0.8 : 1.25;
      var at = u.posToVal(u.cursor.left, 'x'), lo = at - (at - sx.min) * f, hi = at + (sx.max - at) * f;
      u.setScale('x', {min: lo, max: hi});
    }, {passive: false});
  }

  function pan(p, e0) {
    var u = p.u, sx = u.scales.x, x0 = e0.clientX, lo = sx.min, hi = sx.max, per = (hi - lo) / u.bbox.width * (window.devicePixelRatio || 1);
    function move(e) { var dx = (e.clientX - x0) * per; u.setScale('x', {min: lo - dx, max: hi - dx}); }
    function up() { document.removeEventListener('mousemove', move); document.removeEventListener('mouseup', up); }
    document.addEventListener('mousemove', move); document.addEventListener('mouseup', up);
  }

  function caption(p) {
    var spec = p.spec, cap = p.fig.querySelector('figcaption'), n = spec.series.length, parts = [];
    parts.push(n + ' trial' + (n === 1 ? '' : 's') + (spec.single ? ' (one point each, by trial number)' : ''));
    var np = spec.series.filter(function (s) { return T[s.t].pruned; }).length;
    if (np) parts.push(np + ' pruned (dashed orange, \u00d7 at the rung)');
    var html = esc(parts.join('; '));
    if (spec.clipped.length && !spec.single) {
      html += '; <span class="clipnote">' + (state.clip ? 'y clipped to [' + fmt(spec.lo) + ', ' + fmt(spec.hi) + ']: ' :
        'outside [' + fmt(spec.lo) + ', ' + fmt(spec.hi) + ']: ') + spec.clipped.map(function (t) {
        return '<span class="trial-link" data-trial="' + esc(T[t].id) + '">' + esc(T[t].id) + '</span>';
      }).join(', ') + (state.clip ? ' (red triangles; untick "clip outliers" for the full range)' : '') + '</span>';
    }
    cap.innerHTML = html + '. Drag: zoom; wheel: zoom x; shift+drag: pan; double click: reset; click: select a trial.';
  }

  function rebuild() {
    plots.forEach(function (p) { build(p); caption(p); });
    save();
  }

  // ------------------------------------------------------------------ selection

  function select(id) {
    state.sel = id == null || byId[id] == null ? null : id;
    plots.forEach(function (p) {
      var u = p.u;
      for (var i = 1; i < u.series.length; i++) {
        var t = T[p.order[i - 1]];
        u.series[i].alpha = state.sel == null || state.sel === t.id ? 1 : 0.25;
      }
      u.redraw(false);
    });
    var svgs = document.querySelectorAll('svg.plot');
    for (var s = 0; s < svgs.length; s++) {
      var els = svgs[s].querySelectorAll('[data-trial]'), any = false;
      for (var e = 0; e < els.length; e++) {
        var on = els[e].getAttribute('data-trial') === state.sel;
        els[e].classList.toggle('hl', on);
        any = any || on;
      }
      svgs[s].classList.toggle('has-hl', any);
    }
    var rows = document.querySelectorAll('#trials-table tr[data-trial], #legend .chip');
    for (var r = 0; r < rows.length; r++) rows[r].classList.toggle('hl', rows[r].getAttribute('data-trial') === state.sel);
    var bar = document.getElementById('selection');
    if (state.sel == null) {
      bar.textContent = 'click a curve, a point, a line or a table row to highlight a trial everywhere';
    } else {
      var t = T[byId[state.sel]];
      bar.innerHTML = 'selected: <b>' + esc(t.id) + '</b> (' + esc(t.status) + (t.pruned && t.rung ? ' at step ' + t.rung : '') +
        (t.value != null ? ', ' + esc(D.metric) + ' = ' + fmt(t.value) : '') + (t.rank ? ', rank ' + t.rank : '') +
        ') <button type="button" id="clear-selection">clear</button>';
    }
    save();
  }

  document.addEventListener('click', function (e) {
    var el = e.target.closest ? e.target.closest('[data-trial]') : null;
    if (e.target.id === 'clear-selection') { select(null); return; }
    if (!el || el.closest('#legend input') || el.closest('.uplot')) return;
    if (el.tagName === 'INPUT') return;
    var id = el.getAttribute('data-trial');
    select(id === state.sel ? null : id);
  });
  document.addEventListener('keydown', function (e) { if (e.key === 'Escape') select(null); });

  // ------------------------------------------------------------------ legend and controls

  function legend() {
    var box = document.getElementById('legend');
    if (!box) return;
    var order = T.map(function (t, i) { return i; }).filter(function (i) {
      return D.curves.some(function (c) { return c.series.some(function (s) { return s.t === i; }); });
    });
    order.sort(function (a, b) {
      var ta = T[a], tb = T[b];
      return (ta.rank || 1e9) - (tb.rank || 1e9) || (ta.pruned ? 1 : 0) - (tb.pruned ? 1 : 0) || ta.order - tb.order;
    });
    box.innerHTML = order.map(function (i) {
      var t = T[i];
      return '<span class="chip' + (state.hidden[t.id] ? ' off' : '') + '" data-trial="' + esc(t.id) + '"><input type="checkbox"' +
        (state.hidden[t.id] ? '' : ' checked') + ' data-show="' + esc(t.id) + '" title="show or hide in every curve plot">' +
        '<span class="sw" style="background:' + t.color + '"></span>' + (t.rank ? '#' + t.rank + ' ' : '') + esc(t.id) +
        (t.pruned ? ' (pruned)' : t.feasible ? '' : ' (' + esc(t.status) + ')') + '</span>';
    }).join('');
    box.addEventListener('change', function (e) {
      var id = e.target.getAttribute('data-show');
      if (id == null) return;
      setShown([id], e.target.checked);
    });
  }

  function setShown(ids, show) {
    ids.forEach(function (id) { if (show) delete state.hidden[id]; else state.hidden[id] = true; });
    plots.forEach(function (p) {
      for (var i = 1; i < p.u.series.length; i++) {
        var id = T[p.order[i - 1]].id;
        if (ids.indexOf(id) >= 0 && p.u.series[i].show !== show) p.u.setSeries(i, {show: show});
      }
    });
    var boxes = document.querySelectorAll('#legend input[data-show]');
    for (var b = 0; b < boxes.length; b++) {
      var bid = boxes[b].getAttribute('data-show');
      boxes[b].checked = !state.hidden[bid];
      boxes[b].parentNode.classList.toggle('off', !!state.hidden[bid]);
    }
    save();
  }

  function controls() {
    var el = function (id) { return document.getElementById(id); };
    if (!el('ctl-log')) return;
    el('ctl-log').checked = state.log; el('ctl-clip').checked = state.clip; el('ctl-smooth').value = state.smooth;
    el('smooth-v').textContent = state.smooth.toFixed(2);
    el('ctl-log').addEventListener('change', function (e) { state.log = e.target.checked; rebuild(); });
    el('ctl-clip').addEventListener('change', function (e) { state.clip = e.target.checked; rebuild(); });
    el('ctl-smooth').addEventListener('input', function (e) {
      state.smooth = +e.target.value; el('smooth-v').textContent = state.smooth.toFixed(2); rebuild();
    });
    el('ctl-reset').addEventListener('click', rebuild);
    var all = T.map(function (t) { return t.id; });
    el('ctl-all').addEventListener('click', function () { setShown(all, true); });
    el('ctl-none').addEventListener('click', function () { setShown(all, false); });
    el('ctl-best').addEventListener('click', function () {
      setShown(all, false); setShown(T.filter(function (t) { return t.best; }).map(function (t) { return t.id; }), true);
    });
  }

  // ------------------------------------------------------------------ start

  D.curves.forEach(function (spec) {
    var fig = document.getElementById(spec.id);
    if (fig) plots.push({spec: spec, fig: fig, host: fig.querySelector('.plot-host')});
  });
  // a group of the logged series: its plot draws the series picked in its select
  function pick(p, m) {
    if (!S.curves[m] || p.group.metrics.indexOf(m) < 0) return false;
    p.spec = S.curves[m]; p.select.value = m; state.pick[p.group.name] = m;
    if (p.u) { build(p); caption(p); save(); }
    return true;
  }
  S.groups.forEach(function (g) {
    var fig = document.getElementById(g.id);
    if (!fig) return;
    var p = {fig: fig, host: fig.querySelector('.plot-host'), group: g, select: fig.querySelector('select')};
    if (!pick(p, state.pick[g.name])) pick(p, g.metrics[0]);
    p.select.addEventListener('change', function () { pick(p, p.select.value); });
    plots.push(p);
  });
  legend();
  controls();
  rebuild();
  select(state.sel);
  if (saved && saved.path === location.pathname && saved.y) window.scrollTo(0, saved.y);
  var widths = plots.map(function (p) { return p.host.clientWidth; });
  if (window.ResizeObserver) {
    var ro = new ResizeObserver(function () {
      plots.forEach(function (p, i) {
        var w = p.host.clientWidth;
        if (w !== widths[i] && w > 0) {
          widths[i] = w;
          p.u.setSize({width: w, height: plotHeight(w)});
        }
      });
    });
    plots.forEach(function (p) { ro.observe(p.host); });
  }

  if (W && !W.done) {
    var note = document.getElementById('watching');
    window.dluaWatch = function (s) {
      if (s.stamp !== W.stamp) { save(); location.reload(); return; }
      if (note) note.textContent = 'watching: checked ' + new Date().toLocaleTimeString() +
        (s.done ? '; the ' + (D.kind === 'run' ? 'run' : 'study') + ' is finished' : '');
      if (s.done) clearInterval(timer);
    };
    var timer = setInterval(function () {
      var sc = document.createElement('script');
      sc.src = W.file + '?' + Date.now();
      sc.onload = sc.onerror = function () { sc.parentNode.removeChild(sc); };
      document.head.appendChild(sc);
    }, W.interval);
  }
  window.dluaReadyMs = window.performance ? performance.now() : 0;
  window.dluaReport = {state: state, plots: plots, select: select, setShown: setShown, rebuild: rebuild,
    pick: function (m) {
      var p = plots.filter(function (q) { return q.group && q.group.metrics.indexOf(m) >= 0; })[0];
      return p ? pick(p, m) && plots.indexOf(p) : -1;
    }};
})();
