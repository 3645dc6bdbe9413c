/* nvtest report: matrix, panels and long tables rendered from the embedded JSON.
   Every datum goes into the page through textContent or setAttribute, never innerHTML. */
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('nvtest-data').textContent);
  var RANK = { skip: 0, pass: 1, warn: 2, error: 3, fail: 4 };
  var CODE = { p: 'pass', w: 'warn', f: 'fail', e: 'error', s: 'skip', '-': 'none' };
  var SCHEME = /^[a-z][a-z0-9+.-]*:/i;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]);
    return parent;
  }
  function badge(v) { return el('span', 'badge ' + (RANK.hasOwnProperty(v) ? v : 'skip'), v); }
  function fmt(x) {
    if (x === null || x === undefined) return '-';
    if (typeof x === 'number') return Number(x.toPrecision(4)).toString();
    return String(x);
  }
  function link(href, text) {
    if (!href || SCHEME.test(href) || href.charAt(0) === '/' || href.indexOf('..') >= 0) return null;
    var a = el('a', null, text); a.setAttribute('href', href); return a;
  }
  function table(headers, rows) {
    var t = el('table', 'data'), th = el('thead'), tr = el('tr'), tb = el('tbody');
    headers.forEach(function (h) { tr.appendChild(el('th', null, h)); });
    add(t, add(th, tr), tb);
    rows.forEach(function (r) {
      var row = el('tr');
      r.forEach(function (c) {
        var td = el('td');
        if (c instanceof Node) td.appendChild(c); else td.textContent = c === null || c === undefined ? '-' : String(c);
        row.appendChild(td);
      });
      tb.appendChild(row);
    });
    return t;
  }
  function natural(a, b) { return a.localeCompare(b, undefined, { numeric: true, sensitivity: 'base' }); }
  var T = D.T;
  var nodeIndex = {};
  D.nodes.forEach(function (n, i) { nodeIndex[n.n] = i; });

  /* ---------- the compact blob, expanded on demand (shape: nvtest/report/blob.py) ---------- */
  function itemOf(ni, ci) {
    var it = D.items[ni] && D.items[ni][ci];
    if (!it) return null;
    var n = D.nodes[ni], keys = D.keys[ci];
    var l = it.l !== undefined ? it.l : (n.ld ? n.ld + '/' + D.checks[ci].name + '.log' : '');
    return {
      v: CODE[n.c.charAt(ci)], r: it.r || '', l: l || null, d: it.d !== undefined ? T[it.d] : null, t: it.t,
      m: it.m.map(function (m) {
        var k = keys[m[0]], med = k[4], v = m[1], full = m.length > 3;
        var delta = typeof v === 'number' && typeof med === 'number' && med !== 0 ? (v - med) / med * 100 : null;
        var fleet = med === null ? null : [med, delta, m[2], full ? !!m[4] : false];
        return [k[0], k[1], v, k[2], full ? m[3] : 'pass', full ? m[5] : '', k[3], fleet];
      })
    };
  }
  function inventoryOf(ni) {
    var x = D.inventory[ni] || {}, h = x.h !== undefined ? T[x.h] : [];
    function refs(list) { return (list || []).map(function (i) { return T[i]; }); }
    return {
      cpu: h[0], cores: h[1], sockets: h[2], mem: h[3], os: h[4], kernel: h[5], driver: h[6], cuda: h[7],
      gpus: (x.g || []).map(function (g) { var r = T[g[0]].slice(); r[2] = g[1]; r[3] = g[2]; return r; }),
      gpuAbsent: x.ga !== undefined ? T[x.ga] : null, nics: refs(x.n), other: refs(x.o), notes: x.no || [],
      skuMatch: x.sm !== undefined ? T[x.sm] : [], log: x.l || null
    };
  }
  function evidenceOf(ni) {
    var seen = {}, out = [], inv = D.inventory[ni] || {};
    if (inv.l) { seen[inv.l] = 1; out.push(['inventory', inv.l]); }
    D.checks.forEach(function (c, ci) {
      var it = itemOf(ni, ci);
      if (it && it.l && !seen[it.l]) { seen[it.l] = 1; out.push([c.name, it.l]); }
    });
    return out;
  }

  /* ---------- paginated table ---------- */
  function Pager(box, headers, rows, size, renderRow) {
    this.box = box; this.headers = headers; this.rows = rows; this.size = size; this.page = 0; this.renderRow = renderRow;
  }
  Pager.prototype.render = function () {
    var self = this, box = this.box;
    while (box.firstChild) box.removeChild(box.firstChild);
    var size = this.size || this.rows.length || 1;
    var pages = Math.max(1, Math.ceil(this.rows.length / size));
    if (this.page >= pages) this.page = pages - 1;
    var start = this.page * size, slice = this.rows.slice(start, start + size);
    var t = table(this.headers, []), tb = t.tBodies[0];
    slice.forEach(function (r) { tb.appendChild(self.renderRow(r)); });
    box.appendChild(t);
    if (pages > 1) {
      var p = el('div', 'pager');
      var prev = el('button', null, '‹ previous'), next = el('button', null, 'next ›');
      prev.type = next.type = 'button';
      prev.disabled = this.page === 0; next.disabled = this.page >= pages - 1;
      prev.addEventListener('click', function () { self.page--; self.render(); });
      next.addEventListener('click', function () { self.page++; self.render(); });
      add(p, prev, el('span', null, 'rows ' + (start + 1) + '–' + Math.min(start + size, this.rows.length) + ' of ' + this.rows.length), next);
      box.appendChild(p);
    }
  };

  /* ---------- side panel ---------- */
  var panel = document.getElementById('panel'), body = document.getElementById('panel-body');
  function openPanel(title) {
    while (body.firstChild) body.removeChild(body.firstChild);
    var h = el('h3', null, title); h.id = 'panel-title';
    body.appendChild(h);
    panel.hidden = false;
    panel.scrollTop = 0;
    return body;
  }
  function closePanel() { panel.hidden = true; }
  document.getElementById('panel-close').addEventListener('click', closePanel);
  document.addEventListener('keydown', function (e) { if (e.key === 'Escape') closePanel(); });

  function openItem(ci, node) {
    var it = itemOf(nodeIndex[node], ci);
    if (!it) return;
    var c = D.checks[ci];
    var b = openPanel(c.title + ' on ' + node);
    b.setAttribute('data-item', c.name + '|' + node);
    var p = el('p'); add(p, badge(it.v), document.createTextNode(' ' + c.name + (it.t !== null && it.t !== undefined ? ' · ' + fmt(it.t) + ' s' : '')));
    b.appendChild(p);
    if (it.r) b.appendChild(el('p', 'reason', it.r));
    if (it.d) {
      var d = el('div', 'alert' + (it.v === 'warn' ? ' warn' : ' error'));
      add(d, el('div', null, 'Likely cause: ' + it.d[0]), el('div', null, 'Next step: ' + it.d[1]), it.d[2] ? el('div', 'muted', 'class: ' + it.d[2]) : null);
      b.appendChild(d);
    }
    if (it.m.length) {
      var rows = it.m.map(function (m) {
        var thr = m[6] >= 0 ? D.thresholds[m[6]] : null;
        var src = el('span', null, thr ? thr[1] : 'measured only');
        if (thr && thr[2]) add(src, el('div', 'muted', thr[2]));
        var fl = m[7] ? 'median ' + fmt(m[7][0]) + (m[7][1] !== null ? ', Δ ' + fmt(m[7][1]) + ' %' : '') + (m[7][2] !== null ? ', z ' + fmt(m[7][2]) : '') + (m[7][3] ? ' (outlier)' : '') : '-';
        var name = el('span', null, m[0]); if (m[1]) add(name, el('div', 'muted', m[1]));
        return [name, fmt(m[2]) + ' ' + m[3], badge(m[4]), thr ? thr[0] : '-', src, fl, m[5]];
      });
      var hasFleet = it.m.some(function (m) { return m[7]; }), hasReason = it.m.some(function (m) { return m[5]; });
      var keep = [true, true, true, true, true, hasFleet, hasReason];
      var heads = ['metric', 'value', 'verdict', 'threshold', 'source', 'fleet', 'reason'].filter(function (h, i) { return keep[i]; });
      b.appendChild(table(heads, rows.map(function (r) { return r.filter(function (c, i) { return keep[i]; }); })));
    }
    var a = link(it.l, 'raw evidence: ' + it.l);
    if (a) add(b, add(el('p'), a));
    var more = el('p'), na = el('a', null, 'inventory of ' + node); na.setAttribute('href', '#');
    na.addEventListener('click', function (e) { e.preventDefault(); openNode(node); });
    add(b, add(more, na));
  }

  function openNode(name) {
    var ni = nodeIndex[name], n = D.nodes[ni];
    if (!n) return;
    var inv = inventoryOf(ni);
    var b = openPanel('Node ' + name);
    var p = el('p'); add(p, badge(n.v), document.createTextNode(' SKU ' + (n.s || 'none') + (n.r ? ' · rack ' + n.r : '') + (n.t ? ' · ' + n.t : '')));
    b.appendChild(p);
    if (n.d) b.appendChild(el('div', 'alert error', 'Unreachable: ' + n.d));
    if (n.dr) b.appendChild(el('div', 'alert warn', 'Drained: ' + n.dr));
    var checks = el('p');
    D.checks.forEach(function (c, i) {
      var code = n.c.charAt(i);
      if (code === '-') return;
      var a = el('a', null, c.name + ' ' + CODE[code]); a.setAttribute('href', '#'); a.className = 'vtext ' + CODE[code];
      a.addEventListener('click', function (e) { e.preventDefault(); openItem(i, name); });
      add(checks, a, document.createTextNode('  '));
    });
    b.appendChild(checks);
    b.appendChild(el('h4', null, 'Host'));
    b.appendChild(table(['CPU', 'memory', 'OS / kernel', 'driver / CUDA'], [[
      (inv.cpu || '-') + (inv.sockets ? ' · ' + inv.sockets + ' socket(s), ' + inv.cores + ' cores' : ''),
      inv.mem !== null && inv.mem !== undefined ? inv.mem + ' GiB' : '-',
      (inv.os || '-') + ' / ' + (inv.kernel || '-'), (inv.driver || '-') + ' / ' + (inv.cuda || '-')]]));
    if (inv.skuMatch && inv.skuMatch.length) b.appendChild(el('p', 'muted', 'SKU match: ' + inv.skuMatch.join('; ')));
    b.appendChild(el('h4', null, 'GPUs'));
    if (inv.gpus && inv.gpus.length) {
      b.appendChild(table(['#', 'name', 'serial', 'UUID', 'bus id', 'memory MiB', 'VBIOS', 'ECC', 'PCIe link (cur/max)', 'MIG'],
        inv.gpus.map(function (g) {
          var lk = el('span', g[9] ? 'vtext fail' : null, g[8] + (g[9] ? ' downgraded' : ''));
          return [g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], lk, g[10]];
        })));
    } else b.appendChild(el('p', 'muted', inv.gpuAbsent || 'none reported'));
    b.appendChild(el('h4', null, 'NICs / HCAs'));
    if (inv.nics && inv.nics.length) b.appendChild(table(['port or slot', 'model', 'firmware', 'state / driver'], inv.nics));
    else b.appendChild(el('p', 'muted', 'none reported'));
    if (inv.other && inv.other.length) { b.appendChild(el('h4', null, 'Firmware and other versions')); b.appendChild(table(['item', 'value'], inv.other)); }
    if (inv.notes && inv.notes.length) b.appendChild(el('p', 'muted', 'Notes: ' + inv.notes.join('; ')));
    b.appendChild(el('h4', null, 'Raw logs'));
    var ev = el('p');
    evidenceOf(ni).forEach(function (e) { var a = link(e[1], e[0]); if (a) add(ev, a, document.createTextNode('  ')); });
    if (!ev.firstChild) ev.textContent = 'none';
    b.appendChild(ev);
  }

  /* ---------- matrix ---------- */
  var M = { verdict: '', rack: '', text: '', key: 'node', dir: 1, page: 0, size: 250 };
  var mt = document.getElementById('matrix'), mbody = mt.tBodies[0];
  var fv = document.getElementById('f-verdict'), fr = document.getElementById('f-rack');
  var ft = document.getElementById('f-text'), fs = document.getElementById('f-size');
  var count = document.getElementById('m-count'), mpager = document.getElementById('m-pager');

  function matches(n) {
    if (M.verdict === 'bad') { if (n.v !== 'fail' && n.v !== 'error') return false; }
    else if (M.verdict && n.v !== M.verdict) return false;
    if (M.rack && n.r !== M.rack) return false;
    if (M.text) {
      var q = M.text.toLowerCase();
      if (n.n.toLowerCase().indexOf(q) < 0 && n.t.toLowerCase().indexOf(q) < 0 && n.r.toLowerCase().indexOf(q) < 0) return false;
    }
    return true;
  }
  function sortKey(n) {
    if (M.key === 'node') return n.n;
    if (M.key === 'rack') return n.r;
    if (M.key === 'verdict') return RANK[n.v];
    var code = n.c.charAt(+M.key.slice(1));
    return code === '-' ? -1 : RANK[CODE[code]];
  }
  function renderMatrix() {
    var rows = D.nodes.filter(matches);
    rows.sort(function (a, b) {
      var ka = sortKey(a), kb = sortKey(b), r;
      r = typeof ka === 'number' ? ka - kb : natural(ka, kb);
      if (r === 0) r = natural(a.n, b.n) * M.dir;
      return r * M.dir;
    });
    var size = M.size || rows.length || 1, pages = Math.max(1, Math.ceil(rows.length / size));
    if (M.page >= pages) M.page = pages - 1;
    var start = M.page * size, slice = rows.slice(start, start + size);
    var frag = document.createDocumentFragment();
    slice.forEach(function (n) {
      var tr = el('tr', 'mrow');
      tr.setAttribute('data-node', n.n); tr.setAttribute('data-verdict', n.v);
      var nc = el('td', 'node', n.n); nc.tabIndex = 0; if (n.d) nc.title = 'unreachable: ' + n.d;
      add(tr, nc, el('td', null, n.r || '-'), el('td', 'vtext ' + n.v, n.v + (n.dr ? ' (drained)' : '')));
      for (var i = 0; i < D.checks.length; i++) {
        var v = CODE[n.c.charAt(i)] || 'none';
        var td = el('td', 'cell ' + v, v === 'none' ? '–' : v);
        if (v !== 'none') { td.setAttribute('data-ci', i); td.tabIndex = 0; td.title = D.checks[i].name + ' on ' + n.n + ': ' + v; }
        tr.appendChild(td);
      }
      frag.appendChild(tr);
    });
    while (mbody.firstChild) mbody.removeChild(mbody.firstChild);
    mbody.appendChild(frag);
    count.textContent = rows.length + ' of ' + D.nodes.length + ' nodes match' + (pages > 1 ? ' · page ' + (M.page + 1) + ' of ' + pages : '');
    while (mpager.firstChild) mpager.removeChild(mpager.firstChild);
    if (pages > 1) {
      var prev = el('button', null, '‹ previous'), next = el('button', null, 'next ›');
      prev.type = next.type = 'button';
      prev.disabled = M.page === 0; next.disabled = M.page >= pages - 1;
      prev.addEventListener('click', function () { M.page--; renderMatrix(); });
      next.addEventListener('click', function () { M.page++; renderMatrix(); });
      add(mpager, prev, el('span', null, 'nodes ' + (start + 1) + '–' + Math.min(start + size, rows.length) + ' of ' + rows.length), next);
    }
    Array.prototype.forEach.call(mt.tHead.rows[0].cells, function (th) {
      th.classList.toggle('sorted-asc', th.getAttribute('data-sort') === M.key && M.dir === 1);
      th.classList.toggle('sorted-desc', th.getAttribute('data-sort') === M.key && M.dir === -1);
    });
  }
  function activate(e) {
    var td = e.target.closest('td');
    if (!td) return;
    var tr = td.parentNode;
    if (td.classList.contains('node')) openNode(tr.getAttribute('data-node'));
    else if (td.hasAttribute('data-ci')) openItem(+td.getAttribute('data-ci'), tr.getAttribute('data-node'));
  }
  mbody.addEventListener('click', activate);
  mbody.addEventListener('keydown', function (e) { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); activate(e); } });
  mt.tHead.addEventListener('click', function (e) {
    var th = e.target.closest('th'); if (!th) return;
    var key = th.getAttribute('data-sort');
    if (M.key === key) M.dir = -M.dir; else { M.key = key; M.dir = key === 'node' || key === 'rack' ? 1 : -1; }
    renderMatrix();
  });
  fv.addEventListener('change', function () { M.verdict = fv.value; M.page = 0; renderMatrix(); });
  if (fr) fr.addEventListener('change', function () { M.rack = fr.value; M.page = 0; renderMatrix(); });
  ft.addEventListener('input', function () { M.text = ft.value.trim(); M.page = 0; renderMatrix(); });
  fs.addEventListener('change', function () { M.size = +fs.value; M.page = 0; renderMatrix(); });

  /* ---------- inventory per node ---------- */
  var invBox = document.getElementById('inv-box');
  var invRows = D.nodes.map(function (n) { return n.n; });
  function invRow(name) {
    var ni = nodeIndex[name], n = D.nodes[ni], inv = inventoryOf(ni), tr = el('tr');
    var nc = el('td', 'node'), a = el('a', null, name); a.setAttribute('href', '#');
    a.addEventListener('click', function (e) { e.preventDefault(); openNode(name); });
    nc.appendChild(a);
    var gpus = inv.gpus || [], models = {}, vb = {}, down = 0;
    gpus.forEach(function (g) { models[g[1]] = (models[g[1]] || 0) + 1; if (g[6]) vb[g[6]] = 1; if (g[9]) down++; });
    var gtext = Object.keys(models).map(function (k) { return models[k] + 'x ' + k; }).join(', ') || (n.d ? 'unreachable' : 'none');
    var pcie = el('span', down ? 'vtext fail' : null, gpus.length ? (down ? down + ' downgraded' : 'all at max') : '-');
    [nc, el('td', null, n.r || '-'), el('td', null, n.s || '-'), el('td', null, inv.cpu || '-'),
      el('td', null, inv.mem !== null && inv.mem !== undefined ? inv.mem + ' GiB' : '-'), el('td', null, gtext),
      el('td', null, (inv.driver || '-') + ' / ' + (inv.cuda || '-')), el('td', null, Object.keys(vb).join(', ') || '-'),
      add(el('td'), pcie), el('td', null, (inv.nics || []).length)].forEach(function (td) { tr.appendChild(td); });
    return tr;
  }
  var invPager = new Pager(invBox, ['node', 'rack', 'SKU', 'CPU', 'memory', 'GPUs', 'driver / CUDA', 'VBIOS', 'PCIe links', 'NICs'], invRows, 100, invRow);
  invPager.render();

  /* ---------- raw logs per node ---------- */
  var evPager = new Pager(document.getElementById('ev-box'), ['node', 'directory', 'logs'], invRows, 100, function (name) {
    var ni = nodeIndex[name], n = D.nodes[ni], tr = el('tr'), logs = el('td');
    evidenceOf(ni).forEach(function (e, i) {
      var a = link(e[1], e[0]); if (!a) return;
      if (i) logs.appendChild(document.createTextNode(' · '));
      logs.appendChild(a);
    });
    if (!logs.firstChild) logs.appendChild(el('span', 'muted', 'none'));
    var dir = el('td'); if (n.dir || n.ld) dir.appendChild(el('code', null, (n.dir || n.ld) + '/')); else dir.textContent = '-';
    add(tr, el('td', null, name), dir, logs);
    return tr;
  });
  evPager.render();

  /* ---------- every value of a check ---------- */
  var valuePagers = [];
  Array.prototype.forEach.call(document.querySelectorAll('details.allvals'), function (det) {
    var done = false;
    function fill() {
      if (done) return; done = true;
      var ci = +det.getAttribute('data-ci'), rows = [];
      D.nodes.forEach(function (n, ni) {
        var it = itemOf(ni, ci); if (!it) return;
        it.m.forEach(function (m) { rows.push([n.n, m]); });
      });
      var pg = new Pager(det.querySelector('.box'), ['node', 'metric', 'labels', 'value', 'verdict', 'reason'], rows, 100, function (r) {
        var m = r[1], tr = el('tr');
        var v = el('td'); v.appendChild(badge(m[4]));
        add(tr, el('td', null, r[0]), el('td', null, m[0]), el('td', 'muted', m[1]), el('td', 'num', fmt(m[2]) + ' ' + m[3]), v, el('td', null, m[5]));
        return tr;
      });
      pg.render(); valuePagers.push(pg);
    }
    det.addEventListener('toggle', fill);
    det._fill = fill;
  });

  /* ---------- print: everything on paper ---------- */
  var before = null;
  window.addEventListener('beforeprint', function () {
    before = M.size; M.size = 0; M.page = 0; renderMatrix();
    invPager.size = 0; invPager.render(); evPager.size = 0; evPager.render();
  });
  window.addEventListener('afterprint', function () {
    if (before !== null) { M.size = before; renderMatrix(); }
    invPager.size = 100; invPager.render(); evPager.size = 100; evPager.render();
  });

  renderMatrix();
  document.documentElement.setAttribute('data-ready', '1');
})();
