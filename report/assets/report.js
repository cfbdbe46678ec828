// tierpack report: draws the charts of index.html from the JSON embedded in the page
// (the script element with id "report-data"). No network, no libraries: plain canvas 2D. Embedded into the
// tierpack binary at build time (report/CMakeLists.txt); html_report.cpp writes the data.
'use strict';

(function () {
  const body = document.body;
  const errors = [];
  window.addEventListener('error', function (e) {
    errors.push(String(e.message || e));
    body.setAttribute('data-render-errors', JSON.stringify(errors));
    const banner = document.getElementById('render-error');
    if (banner) {
      banner.hidden = false;
      banner.textContent = 'Chart rendering failed: ' + errors.join('; ');
    }
  });

  const D = JSON.parse(document.getElementById('report-data').textContent);
  const CLASS_NAMES = D.classes;
  const CLASS_COLORS = ['#f28e2c', '#4e79a7', '#59a14f', '#af7aa1'];
  const MIXED_COLOR = '#9c755f';
  const TIER_COLORS = ['#4e79a7', '#a0cbe8', '#76b7b2', '#bab0ab', '#f28e2c', '#ffbe7d', '#59a14f', '#edc949'];
  const KIND_COLORS = {evict: '#e15759', prefetch: '#4e79a7', stall: '#000000'};
  const CELL_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const tooltip = document.getElementById('tooltip');

  // ---- formatting -------------------------------------------------------------------------------
  function fmtBytes(b) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let v = b, u = 0;
    while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    return u === 0 ? v.toFixed(0) + ' B' : v.toFixed(v >= 10 ? 1 : 2) + ' ' + units[u];
  }
  function fmtTime(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(2) + ' s';
    if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e8 ? 0 : a >= 1e7 ? 1 : 2) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(a >= 1e5 ? 0 : 1) + ' us';
    return ns.toFixed(0) + ' ns';
  }
  function niceStep(range, target) {
    const raw = range / Math.max(target, 1);
    const mag = Math.pow(10, Math.floor(Math.log10(raw || 1)));
    for (const f of [1, 2, 5, 10]) if (f * mag >= raw) return f * mag;
    return 10 * mag;
  }
  function niceBytesStep(max, target) {
    const raw = max / Math.max(target, 1);
    let unit = 1;
    while (unit * 1024 <= raw) unit *= 1024;
    return niceStep(raw / unit, 1) * unit;
  }

  // ---- canvas set-up ----------------------------------------------------------------------------
  const charts = [];
  function setupCanvas(canvas, height) {
    const width = Math.max(canvas.parentElement.clientWidth, 320);
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = width + 'px';
    canvas.style.height = height + 'px';
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    ctx.font = '12px system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif';
    ctx.textBaseline = 'middle';
    return {ctx: ctx, width: width, height: height};
  }
  function register(canvas, hit) {
    canvas.onmousemove = function (ev) {
      const r = canvas.getBoundingClientRect();
      const text = hit(ev.clientX - r.left, ev.clientY - r.top);
      if (!text) { tooltip.hidden = true; return; }
      tooltip.textContent = text;
      tooltip.hidden = false;
      tooltip.style.left = (ev.pageX + 14) + 'px';
      tooltip.style.top = (ev.pageY + 14) + 'px';
    };
    canvas.onmouseleave = function () { tooltip.hidden = true; };
  }
  function timeAxis(ctx, x0, x1, y, endNs) {
    ctx.strokeStyle = '#888';
    ctx.fillStyle = '#444';
    ctx.textAlign = 'center';
    ctx.beginPath();
    ctx.moveTo(x0, y + 0.5);
    ctx.lineTo(x1, y + 0.5);
    ctx.stroke();
    const step = niceStep(endNs, 8);
    for (let t = 0; t <= endNs * 1.0001 && step > 0; t += step) {
      const x = x0 + (x1 - x0) * t / endNs;
      ctx.beginPath();
      ctx.moveTo(x + 0.5, y);
      ctx.lineTo(x + 0.5, y + 4);
      ctx.stroke();
      ctx.fillText(fmtTime(t), x, y + 12);
    }
  }
  function legend(container, items) {
    container.innerHTML = '';
    for (const it of items) {
      const span = document.createElement('span');
      const sw = document.createElement('i');
      sw.style.background = it.color;
      if (it.border) sw.style.outline = '2px solid ' + it.border;
      span.appendChild(sw);
      span.appendChild(document.createTextNode(it.label));
      container.appendChild(span);
    }
  }

  // ---- memory by tier ---------------------------------------------------------------------------
  function drawMemory() {
    const box = document.getElementById('memory-charts');
    if (!box || !D.memory.length) return;
    box.innerHTML = '';
    let yMax = D.budget ? D.budget.bytes : 0;
    for (const c of D.memory) yMax = Math.max(yMax, c.peak);
    yMax = Math.max(yMax * 1.05, 1);
    const tierColor = {};
    let next = 0;
    for (const c of D.memory) for (const n of c.names) if (!(n in tierColor)) tierColor[n] = TIER_COLORS[next++ % TIER_COLORS.length];
    const endNs = Math.max.apply(null, D.memory.map(c => c.end).concat([D.iteration_ns, 1]));
    for (const c of D.memory) {
      const wrap = document.createElement('div');
      wrap.className = 'plot';
      const title = document.createElement('h3');
      title.textContent = c.title + ' \u2014 peak ' + fmtBytes(c.peak);
      wrap.appendChild(title);
      const canvas = document.createElement('canvas');
      canvas.className = 'plot-canvas';
      canvas.setAttribute('data-plot', 'memory-' + c.source);
      wrap.appendChild(canvas);
      box.appendChild(wrap);
      const g = setupCanvas(canvas, 230);
      const ctx = g.ctx;
      const L = 78, R = g.width - 12, T = 10, B = g.height - 26;
      const X = t => L + (R - L) * t / endNs;
      const Y = v => B - (B - T) * v / yMax;
      // y grid
      ctx.textAlign = 'right';
      ctx.fillStyle = '#444';
      const ystep = niceBytesStep(yMax, 5);
      for (let v = 0; v <= yMax; v += ystep) {
        ctx.strokeStyle = '#e4e4e4';
        ctx.beginPath();
        ctx.moveTo(L, Math.round(Y(v)) + 0.5);
        ctx.lineTo(R, Math.round(Y(v)) + 0.5);
        ctx.stroke();
        ctx.fillText(fmtBytes(v), L - 6, Y(v));
      }
      // stacked step areas, fast tier (series 0) at the bottom
      const n = c.t.length;
      const base = new Float64Array(n);
      for (let s = 0; s < c.names.length; s++) {
        const vals = c.values[s];
        ctx.fillStyle = tierColor[c.names[s]];
        ctx.beginPath();
        ctx.moveTo(X(c.t[0]), Y(base[0]));
        for (let i = 0; i < n; i++) {
          const x0 = X(c.t[i]), x1 = X(i + 1 < n ? c.t[i + 1] : c.end);
          ctx.lineTo(x0, Y(base[i] + vals[i]));
          ctx.lineTo(x1, Y(base[i] + vals[i]));
        }
        for (let i = n - 1; i >= 0; i--) {
          const x0 = X(c.t[i]), x1 = X(i + 1 < n ? c.t[i + 1] : c.end);
          ctx.lineTo(x1, Y(base[i]));
          ctx.lineTo(x0, Y(base[i]));
        }
        ctx.closePath();
        ctx.fill();
        for (let i = 0; i < n; i++) base[i] += vals[i];
      }
      if (D.budget && D.budget.bytes > 0) {
        ctx.strokeStyle = '#d62728';
        ctx.lineWidth = 2;
        ctx.setLineDash([6, 4]);
        ctx.beginPath();
        ctx.moveTo(L, Y(D.budget.bytes));
        ctx.lineTo(R, Y(D.budget.bytes));
        ctx.stroke();
        ctx.setLineDash([]);
        ctx.lineWidth = 1;
        ctx.fillStyle = '#d62728';
        ctx.textAlign = 'right';
        ctx.fillText('budget ' + fmtBytes(D.budget.bytes) + ' (' + D.budget.tier + ')', R - 4, Y(D.budget.bytes) - 8);
      }
      timeAxis(ctx, L, R, B, endNs);
      register(canvas, function (x, y) {
        if (x < L || x > R || y < T || y > B) return null;
        const t = (x - L) / (R - L) * endNs;
        let i = 0;
        while (i + 1 < n && c.t[i + 1] <= t) i++;
        let text = fmtTime(t) + '\n';
        let total = 0;
        for (let s = 0; s < c.names.length; s++) {
          text += c.names[s] + ': ' + fmtBytes(c.values[s][i]) + '\n';
          total += c.values[s][i];
        }
        return text + 'total: ' + fmtBytes(total);
      });
      charts.push(canvas);
    }
    const items = Object.keys(tierColor).map(k => ({label: k, color: tierColor[k]}));
    if (D.budget && D.budget.bytes > 0) items.push({label: 'budget (' + D.budget.source + ')', color: '#d62728'});
    legend(document.getElementById('memory-legend'), items);
  }

  // ---- tensor lifetimes -------------------------------------------------------------------------
  function drawLifetimes() {
    const canvas = document.getElementById('lifetimes-canvas');
    if (!canvas) return;
    const rows = D.lifetimes.rows;
    const others = D.lifetimes.others;
    const bands = [];
    for (let c = 0; c < CLASS_NAMES.length; c++) if (D.lifetimes.others_count[c] > 0) bands.push(c);
    const rowH = 9, bandH = 34;
    const height = 20 + rows.length * rowH + (bands.length ? 14 + bands.length * (bandH + 4) : 0) + 30;
    const g = setupCanvas(canvas, height);
    const ctx = g.ctx;
    const L = 200, R = g.width - 12, T = 10;
    const endNs = Math.max(D.iteration_ns, 1);
    const X = t => L + (R - L) * t / endNs;
    ctx.textAlign = 'right';
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i];
      const y = T + i * rowH;
      ctx.fillStyle = CLASS_COLORS[r.cls];
      ctx.fillRect(X(r.b), y + 1, Math.max(X(r.e) - X(r.b), 1), rowH - 2);
      ctx.fillStyle = 'rgba(0,0,0,0.75)';
      for (const u of r.uses) ctx.fillRect(Math.round(X(u)), y + 1, 1, rowH - 2);
      if (i % 2 === 0 || rowH >= 12) {
        ctx.fillStyle = '#333';
        ctx.font = '10px system-ui, "DejaVu Sans", sans-serif';
        ctx.fillText('#' + r.id + ' ' + fmtBytes(r.bytes), L - 6, y + rowH / 2);
      }
    }
    let y = T + rows.length * rowH + 14;
    const bandTop = [];
    for (const c of bands) {
      bandTop.push(y);
      const vals = others.values[c];
      let max = 1;
      for (const v of vals) max = Math.max(max, v);
      ctx.fillStyle = CLASS_COLORS[c];
      ctx.globalAlpha = 0.85;
      ctx.beginPath();
      ctx.moveTo(X(others.t[0]), y + bandH);
      for (let i = 0; i < others.t.length; i++) {
        const x0 = X(others.t[i]), x1 = X(i + 1 < others.t.length ? others.t[i + 1] : others.end);
        const h = bandH * vals[i] / max;
        ctx.lineTo(x0, y + bandH - h);
        ctx.lineTo(x1, y + bandH - h);
      }
      ctx.lineTo(X(others.end), y + bandH);
      ctx.closePath();
      ctx.fill();
      ctx.globalAlpha = 1;
      ctx.fillStyle = '#333';
      ctx.font = '11px system-ui, "DejaVu Sans", sans-serif';
      ctx.fillText(D.lifetimes.others_count[c] + ' other ' + CLASS_NAMES[c], L - 6, y + bandH / 2 - 6);
      ctx.fillText('peak ' + fmtBytes(max), L - 6, y + bandH / 2 + 7);
      y += bandH + 4;
    }
    ctx.font = '12px system-ui, "DejaVu Sans", sans-serif';
    timeAxis(ctx, L, R, height - 28, endNs);
    register(canvas, function (x, yy) {
      const i = Math.floor((yy - T) / rowH);
      if (i >= 0 && i < rows.length && yy >= T) {
        const r = rows[i];
        return '#' + r.id + ' (seq ' + r.seq + ') ' + fmtBytes(r.bytes) + ', ' + CLASS_NAMES[r.cls] + '\nlive ' +
            fmtTime(r.b) + ' - ' + fmtTime(r.e) + ', ' + r.nuses + ' uses\nallocated by ' + (r.op || '(unknown op)') +
            (r.src ? ' at ' + r.src : '') + (r.mod ? ' in ' + r.mod : '') + '\non ' + r.where;
      }
      for (let k = 0; k < bands.length; k++) {
        if (yy >= bandTop[k] && yy < bandTop[k] + bandH && x >= L) {
          const t = (x - L) / (R - L) * endNs;
          let j = 0;
          while (j + 1 < others.t.length && others.t[j + 1] <= t) j++;
          return D.lifetimes.others_count[bands[k]] + ' smaller ' + CLASS_NAMES[bands[k]] + ' tensors\n' +
              fmtBytes(others.values[bands[k]][j]) + ' live at ' + fmtTime(t);
        }
      }
      return null;
    });
    legend(document.getElementById('lifetimes-legend'),
        CLASS_NAMES.map((n, i) => ({label: n, color: CLASS_COLORS[i]})).concat([{label: 'use by an op', color: '#222'}]));
    charts.push(canvas);
  }

  // ---- page map ---------------------------------------------------------------------------------
  function cellColor(bits) {
    const mask = bits & 15;
    if (mask === 0) return '#eeeeee';
    if ((mask & (mask - 1)) !== 0) return MIXED_COLOR;
    return CLASS_COLORS[Math.log2(mask)];
  }
  function drawPageMaps() {
    const box = document.getElementById('pagemap-charts');
    if (!box) return;
    box.innerHTML = '';
    for (const pm of D.pagemaps) {
      if (!pm.cells.length) continue;
      const wrap = document.createElement('div');
      wrap.className = 'plot';
      const title = document.createElement('h3');
      title.textContent = pm.name + ': ' + pm.pages.toLocaleString('en-US') + ' pages of ' + fmtBytes(pm.page_size) +
          (pm.ppc > 1 ? ' (' + pm.ppc.toLocaleString('en-US') + ' pages per cell)' : ' (one page per cell)');
      wrap.appendChild(title);
      const canvas = document.createElement('canvas');
      canvas.className = 'plot-canvas';
      canvas.setAttribute('data-plot', 'pagemap-' + pm.name);
      wrap.appendChild(canvas);
      box.appendChild(wrap);
      const n = pm.cells.length;
      const width = Math.max(box.clientWidth, 320);
      let cell = Math.floor(Math.sqrt(width * 260 / n));
      cell = Math.max(3, Math.min(cell, 14));
      const perRow = Math.max(1, Math.floor(width / cell));
      const rowsN = Math.ceil(n / perRow);
      const g = setupCanvas(canvas, rowsN * cell + 2);
      const ctx = g.ctx;
      const bits = new Uint8Array(n);
      for (let i = 0; i < n; i++) bits[i] = CELL_ALPHABET.indexOf(pm.cells[i]);
      for (let i = 0; i < n; i++) {
        const x = (i % perRow) * cell, y = Math.floor(i / perRow) * cell;
        ctx.fillStyle = cellColor(bits[i]);
        ctx.fillRect(x, y, cell - (cell > 4 ? 1 : 0), cell - (cell > 4 ? 1 : 0));
      }
      for (let i = 0; i < n; i++) {
        if (!(bits[i] & 48)) continue;
        const x = (i % perRow) * cell, y = Math.floor(i / perRow) * cell;
        if (bits[i] & 16) {
          ctx.strokeStyle = '#d62728';
          ctx.lineWidth = Math.max(1, cell / 4);
          ctx.strokeRect(x + ctx.lineWidth / 2, y + ctx.lineWidth / 2, cell - ctx.lineWidth - 1, cell - ctx.lineWidth - 1);
          ctx.lineWidth = 1;
        }
        if (bits[i] & 32) {
          ctx.fillStyle = '#000';
          const d = Math.max(1, Math.floor(cell / 3));
          ctx.fillRect(x + (cell - d) / 2, y + (cell - d) / 2, d, d);
        }
      }
      register(canvas, function (x, y) {
        const i = Math.floor(y / cell) * perRow + Math.floor(x / cell);
        if (x >= perRow * cell || i < 0 || i >= n) return null;
        const b = bits[i];
        const names = CLASS_NAMES.filter((_, c) => b & (1 << c));
        return 'cell ' + i + ' (' + pm.ppc + ' page' + (pm.ppc > 1 ? 's' : '') + ')\nclasses: ' +
            (names.join(', ') || 'none') + (b & 16 ? '\nfalse-shared page' : '') + (b & 32 ? '\nhidden accesses' : '');
      });
      charts.push(canvas);
    }
    if (D.groups && D.groups.cells.length) {
      const wrap = document.createElement('div');
      wrap.className = 'plot';
      const title = document.createElement('h3');
      title.textContent = 'Planned page groups: ' + D.groups.count.toLocaleString('en-US') + ' groups, ' +
          fmtBytes(D.groups.bytes) + ' (width proportional to bytes, one line per ' + fmtBytes(D.groups.line_bytes) + ')';
      wrap.appendChild(title);
      const canvas = document.createElement('canvas');
      canvas.className = 'plot-canvas';
      canvas.setAttribute('data-plot', 'groups');
      wrap.appendChild(canvas);
      box.appendChild(wrap);
      const lines = Math.max(1, Math.ceil(D.groups.bytes / D.groups.line_bytes));
      const lineH = 18;
      const g = setupCanvas(canvas, lines * (lineH + 4) + 2);
      const ctx = g.ctx;
      const W = g.width;
      const scale = W / D.groups.line_bytes;
      const spans = [];
      let off = 0;
      for (const c of D.groups.cells) {
        const bytes = c[0], cls = c[1], pinned = c[2], count = c[3], mixed = c[4];
        let a = off, rest = bytes;
        while (rest > 0) {
          const line = Math.floor(a / D.groups.line_bytes);
          const inLine = Math.min(rest, (line + 1) * D.groups.line_bytes - a);
          const x = (a - line * D.groups.line_bytes) * scale, y = line * (lineH + 4);
          const w = Math.max(inLine * scale, 1);
          ctx.fillStyle = mixed ? MIXED_COLOR : CLASS_COLORS[cls];
          ctx.fillRect(x, y, w, lineH);
          if (w > 3) { ctx.strokeStyle = '#fff'; ctx.strokeRect(x + 0.5, y + 0.5, w - 1, lineH - 1); }
          if (pinned) { ctx.fillStyle = '#000'; ctx.fillRect(x, y + lineH - 3, w, 3); }
          spans.push({x: x, y: y, w: w, c: c});
          a += inLine;
          rest -= inLine;
        }
        off += bytes;
      }
      register(canvas, function (x, y) {
        for (const s of spans) {
          if (x >= s.x && x < s.x + s.w && y >= s.y && y < s.y + lineH) {
            return s.c[3] + ' group' + (s.c[3] > 1 ? 's' : '') + ', ' + fmtBytes(s.c[0]) + ', ' +
                (s.c[4] ? 'mixed classes' : CLASS_NAMES[s.c[1]]) + (s.c[2] ? '\npinned (never moved)' : '');
          }
        }
        return null;
      });
      charts.push(canvas);
    }
    legend(document.getElementById('pagemap-legend'),
        CLASS_NAMES.map((n, i) => ({label: n, color: CLASS_COLORS[i]})).concat([
          {label: 'more than one class', color: MIXED_COLOR},
          {label: 'false-shared (profile)', color: '#fff', border: '#d62728'},
          {label: 'hidden accesses', color: '#000'},
        ]));
  }

  // ---- migrations -------------------------------------------------------------------------------
  function drawMigrations() {
    const canvas = document.getElementById('migrations-canvas');
    if (!canvas || !D.migrations.length) return;
    // Overlapping moves of one row go to lanes so every move stays visible.
    const layout = [];
    for (const row of D.migrations) {
      const laneEnd = [];
      const placed = [];
      for (const it of row.items) {
        let lane = laneEnd.findIndex(e => e <= it[0]);
        if (lane < 0) lane = Math.min(laneEnd.length, 5);  // at most six lanes; the rest overlap in the last
        laneEnd[lane] = Math.max(laneEnd[lane] || 0, it[1]);
        placed.push({it: it, lane: lane});
      }
      layout.push({row: row, lanes: Math.max(1, laneEnd.length), placed: placed});
    }
    const laneH = 7, gap = 10;
    let height = 10 + 30;
    for (const l of layout) height += l.lanes * laneH + gap;
    const g = setupCanvas(canvas, height);
    const ctx = g.ctx;
    const labels = layout.map(l => l.row.name + ' (' + l.row.count.toLocaleString('en-US') + ')');
    const L = Math.ceil(Math.max.apply(null, labels.map(t => ctx.measureText(t).width))) + 16, R = g.width - 12;
    // Predicted moves are on the simulator's timeline, which runs past the profiled iteration when ops
    // wait or read in place: the axis covers both.
    let endNs = Math.max(D.iteration_ns, 1);
    for (const row of D.migrations) for (const it of row.items) endNs = Math.max(endNs, it[1]);
    const X = t => L + (R - L) * t / endNs;
    let y = 10;
    const hits = [];
    for (const l of layout) {
      const h = l.lanes * laneH;
      ctx.fillStyle = '#f4f4f4';
      ctx.fillRect(L, y, R - L, h);
      ctx.fillStyle = '#333';
      ctx.textAlign = 'right';
      ctx.fillText(labels[layout.indexOf(l)], L - 6, y + h / 2);
      ctx.fillStyle = KIND_COLORS[l.row.kind] || '#666';
      ctx.globalAlpha = l.row.source === 'plan' ? 0.55 : 0.95;
      for (const p of l.placed) {
        const x0 = X(p.it[0]), x1 = X(p.it[1]);
        ctx.fillRect(x0, y + p.lane * laneH + 1, Math.max(x1 - x0, 1), laneH - 2);
        hits.push({x0: x0, x1: Math.max(x1, x0 + 2), y0: y + p.lane * laneH, y1: y + (p.lane + 1) * laneH, p: p.it, row: l.row});
      }
      ctx.globalAlpha = 1;
      y += h + gap;
    }
    timeAxis(ctx, L, R, y, endNs);
    if (endNs > D.iteration_ns) {
      const xe = X(D.iteration_ns);
      ctx.strokeStyle = '#888';
      ctx.setLineDash([3, 3]);
      ctx.beginPath();
      ctx.moveTo(xe + 0.5, 4);
      ctx.lineTo(xe + 0.5, y);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = '#666';
      ctx.textAlign = 'left';
      ctx.fillText('end of the profiled iteration', xe + 4, 6);
    }
    register(canvas, function (x, yy) {
      for (const h of hits) {
        if (x >= h.x0 && x <= h.x1 && yy >= h.y0 && yy < h.y1) {
          const it = h.p;
          return h.row.name + (it[3] > 1 ? ' (' + it[3] + ' merged)' : '') + '\n' + fmtTime(it[0]) + ' - ' + fmtTime(it[1]) +
              (h.row.kind === 'stall' ? '' : ', ' + fmtBytes(it[2])) + (it[3] === 1 ? '\ngroup ' + it[4] : '');
        }
      }
      return null;
    });
    legend(document.getElementById('migrations-legend'), [
      {label: 'eviction (fast \u2192 slow)', color: KIND_COLORS.evict},
      {label: 'prefetch (slow \u2192 fast)', color: KIND_COLORS.prefetch},
      {label: 'stall', color: KIND_COLORS.stall},
      {label: 'lighter: predicted by the plan', color: '#ccc'},
    ]);
    charts.push(canvas);
  }

  function drawAll() {
    charts.length = 0;
    drawMemory();
    drawLifetimes();
    drawPageMaps();
    drawMigrations();
    // What was drawn where, for the rendering test (tests/report/browser_test.py).
    const plots = charts.map(c => {
      const r = c.getBoundingClientRect();
      return {plot: c.getAttribute('data-plot') || c.id, x: Math.round(r.left + window.scrollX),
        y: Math.round(r.top + window.scrollY), w: Math.round(r.width), h: Math.round(r.height)};
    });
    body.setAttribute('data-plots', JSON.stringify(plots));
  }

  const started = performance.now();
  drawAll();
  body.setAttribute('data-render-ms', String(Math.round(performance.now() - started)));
  let resizeTimer = null;
  window.addEventListener('resize', function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(drawAll, 150);
  });
  if (!errors.length) body.setAttribute('data-render', 'ok');
})();
