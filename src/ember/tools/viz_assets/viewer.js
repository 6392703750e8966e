// ember graph viewer: draws the graph laid out by ember.tools.viz on a canvas, only what is on
// screen, so thousands of nodes pan and zoom smoothly. No libraries; the data is the JSON in
// #graph-data (nodes with x centre, y top, width; edges as [source, target, output index]).
"use strict";
(function () {
  const started = performance.now();
  const data = JSON.parse(document.getElementById("graph-data").textContent);
  const nodes = data.nodes;
  const edges = data.edges;
  const H = data.height;
  const canvas = document.getElementById("canvas");
  const ctx = canvas.getContext("2d");
  const details = document.getElementById("details");
  const status = document.getElementById("status");
  const COLORS = {
    forward: ["#dbeafe", "#1d4ed8"],
    backward: ["#fee2e2", "#b91c1c"],
    optimizer: ["#fef3c7", "#92400e"],
    "": ["#f3f4f6", "#374151"],
  };
  const FUSED = new Set(["fused_elementwise", "fused_reduce", "fused_epilogue"]);

  const view = { scale: 1, tx: 0, ty: 0 }; // screen = world * scale + t (CSS pixels)
  const shown = {}; // phase -> whether its nodes are drawn
  const stats = { nodes: nodes.length, edges: edges.length, drawn: 0, frames: 0, firstFrameMs: null, lastDrawMs: null };
  let selected = -1;
  let matches = [];
  let matchAt = -1;
  let pending = false;

  for (const n of nodes) shown[n.phase] = true;
  const visible = (i) => shown[nodes[i].phase];

  // ---------------------------------------------------------------- drawing
  function resize() {
    const ratio = window.devicePixelRatio || 1;
    const box = canvas.getBoundingClientRect();
    canvas.width = Math.max(1, Math.round(box.width * ratio));
    canvas.height = Math.max(1, Math.round(box.height * ratio));
    schedule();
  }

  function schedule() {
    if (!pending) {
      pending = true;
      requestAnimationFrame(draw);
    }
  }

  function draw() {
    pending = false;
    const began = performance.now();
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.width / ratio;
    const height = canvas.height / ratio;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    ctx.setTransform(ratio * view.scale, 0, 0, ratio * view.scale, ratio * view.tx, ratio * view.ty);
    // the world rectangle on screen, with a margin for labels
    const x0 = -view.tx / view.scale - 100;
    const y0 = -view.ty / view.scale - 100;
    const x1 = (width - view.tx) / view.scale + 100;
    const y1 = (height - view.ty) / view.scale + 100;
    const inView = (n) => n.x + n.w / 2 >= x0 && n.x - n.w / 2 <= x1 && n.y + H >= y0 && n.y <= y1;

    // edges, one path per phase so the canvas strokes a few paths, not thousands
    const paths = {};
    const labels = [];
    for (const [a, b, k] of edges) {
      if (!visible(a) || !visible(b)) continue;
      const s = nodes[a];
      const t = nodes[b];
      if (Math.max(s.y, t.y) + H < y0 || Math.min(s.y, t.y) > y1) continue;
      if (Math.max(s.x, t.x) + 200 < x0 || Math.min(s.x, t.x) - 200 > x1) continue;
      const key = a === selected || b === selected ? "selected" : t.phase;
      const path = paths[key] || (paths[key] = new Path2D());
      const sy = s.y + H;
      const mid = (sy + t.y) / 2;
      path.moveTo(s.x, sy);
      path.bezierCurveTo(s.x, mid, t.x, mid, t.x, t.y);
      if (view.scale >= 1.5) labels.push([(s.x + t.x) / 2, mid, s.types[k]]);
    }
    for (const key in paths) {
      ctx.strokeStyle = key === "selected" ? "#7c3aed" : COLORS[key][1];
      ctx.globalAlpha = key === "selected" ? 1 : 0.45;
      ctx.lineWidth = (key === "selected" ? 2.5 : 1) / Math.max(view.scale, 0.2);
      ctx.setLineDash(key === "backward" ? [6, 4] : []);
      ctx.stroke(paths[key]);
    }
    ctx.globalAlpha = 1;
    ctx.setLineDash([]);

    const text = view.scale > 0.3;
    const matched = new Set(matches);
    ctx.font = "12px Helvetica, Arial, sans-serif";
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    let drawn = 0;
    for (let i = 0; i < nodes.length; i++) {
      const n = nodes[i];
      if (!shown[n.phase] || !inView(n)) continue;
      drawn++;
      const [fill, line] = COLORS[n.phase] || COLORS[""];
      const left = n.x - n.w / 2;
      ctx.fillStyle = matched.has(i) ? "#fde047" : fill;
      ctx.fillRect(left, n.y, n.w, H);
      ctx.strokeStyle = i === selected ? "#7c3aed" : line;
      ctx.lineWidth = (i === selected ? 3 : FUSED.has(n.op) ? 2 : 1) / Math.max(view.scale, 0.2);
      ctx.setLineDash(n.phase === "backward" ? [4, 3] : []);
      ctx.strokeRect(left, n.y, n.w, H);
      if (FUSED.has(n.op)) ctx.strokeRect(left + 3, n.y + 3, n.w - 6, H - 6); // a group
      if (text) {
        ctx.fillStyle = "#111827";
        ctx.fillText(clip(n.name + ": " + n.op, n.w), n.x, n.y + H / 2 - 7);
        ctx.fillStyle = "#4b5563";
        ctx.fillText(clip(n.types.join(", "), n.w), n.x, n.y + H / 2 + 8);
      }
    }
    ctx.setLineDash([]);
    if (labels.length && labels.length < 2000) {
      ctx.font = "10px Helvetica, Arial, sans-serif";
      ctx.fillStyle = "#6b7280";
      for (const [x, y, label] of labels) ctx.fillText(label, x, y);
    }
    stats.drawn = drawn;
    stats.frames++;
    stats.lastDrawMs = performance.now() - began;
    if (stats.firstFrameMs === null) {
      stats.firstFrameMs = performance.now() - started;
      document.body.dataset.done = "1";
    }
    status.textContent = `${drawn} of ${nodes.length} nodes drawn, ${edges.length} edges`;
  }

  function clip(label, width) {
    const room = Math.floor((width - 8) / 6.5);
    return label.length <= room ? label : label.slice(0, Math.max(room - 1, 1)) + "\u2026";
  }

  // ---------------------------------------------------------------- view changes
  function fit() {
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (let i = 0; i < nodes.length; i++) {
      if (!visible(i)) continue;
      const n = nodes[i];
      x0 = Math.min(x0, n.x - n.w / 2);
      x1 = Math.max(x1, n.x + n.w / 2);
      y0 = Math.min(y0, n.y);
      y1 = Math.max(y1, n.y + H);
    }
    if (x0 === Infinity) return schedule();
    const box = canvas.getBoundingClientRect();
    const pad = 20;
    view.scale = Math.min(1.5, (box.width - 2 * pad) / (x1 - x0), (box.height - 2 * pad) / (y1 - y0));
    view.tx = box.width / 2 - ((x0 + x1) / 2) * view.scale;
    view.ty = pad - y0 * view.scale;
    schedule();
  }

  function centreOn(i, scale) {
    const box = canvas.getBoundingClientRect();
    if (scale) view.scale = scale;
    view.tx = box.width / 2 - nodes[i].x * view.scale;
    view.ty = box.height / 2 - (nodes[i].y + H / 2) * view.scale;
    schedule();
  }

  function nodeAt(px, py) {
    const x = (px - view.tx) / view.scale;
    const y = (py - view.ty) / view.scale;
    for (let i = nodes.length - 1; i >= 0; i--) {
      const n = nodes[i];
      if (shown[n.phase] && Math.abs(x - n.x) <= n.w / 2 && y >= n.y && y <= n.y + H) return i;
    }
    return -1;
  }

  // ---------------------------------------------------------------- details panel
  // Everything shown comes from the graph, which may come from a file: every piece of it goes
  // through esc() before it reaches innerHTML (row() escapes what it is given; only the markup
  // written here is not escaped).
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  // a count, or an expression in symbolic sizes (a batch of N) shown as it is
  const num = (v) => (v === null || v === undefined ? "n/a" : typeof v === "number" ? v.toLocaleString("en-US") : String(v));

  function row(label, value, cls, markup) {
    // ``markup``: value is HTML built here from escaped pieces (the inputs' <br> list)
    const cell = markup ? value : esc(value);
    return `<tr><th>${esc(label)}</th><td class="${esc(cls || "")}">${cell}</td></tr>`;
  }

  function select(i) {
    selected = i;
    if (i < 0) {
      details.innerHTML = '<p class="hint">Nothing selected.</p>';
      return schedule();
    }
    const n = nodes[i];
    const shapes = n.outputs.map((o) => "(" + o.shape.join(", ") + ")").join(", ");
    const dtypes = n.outputs.map((o) => o.dtype).join(", ");
    let html = `<h2>%${esc(n.name)}</h2><table>`;
    html += row("op", n.op, "op");
    if (n.phase) html += row("phase", n.phase, "phase");
    if (n.scope) html += row("scope", n.scope, "scope");
    html += row("shape", shapes, "shape");
    html += row("dtype", dtypes, "dtype");
    html += row("FLOPs", num(n.flops), "flops");
    html += row("bytes moved", num(n.bytes), "bytes");
    html += row("output memory", num(n.memory) + " B", "memory");
    html += row("inputs", n.inputs.map(esc).join("<br>") || "none", "inputs", true);
    for (const [key, value] of n.attrs) html += row(key, value, "attr");
    html += "</table>";
    if (n.members) html += `<h3>fused members</h3><pre class="members">${esc(n.members.join("\n"))}</pre>`;
    for (const sub of n.subgraphs || []) html += `<pre class="subgraph">${esc(sub)}</pre>`;
    details.innerHTML = html;
    schedule();
  }

  // ---------------------------------------------------------------- input
  let drag = null;
  canvas.addEventListener("mousedown", (e) => {
    drag = { x: e.clientX, y: e.clientY, tx: view.tx, ty: view.ty, moved: false };
    canvas.classList.add("dragging");
  });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x;
    const dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    view.tx = drag.tx + dx;
    view.ty = drag.ty + dy;
    schedule();
  });
  window.addEventListener("mouseup", (e) => {
    if (!drag) return;
    canvas.classList.remove("dragging");
    if (!drag.moved) {
      const box = canvas.getBoundingClientRect();
      select(nodeAt(e.clientX - box.left, e.clientY - box.top));
    }
    drag = null;
  });
  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    const box = canvas.getBoundingClientRect();
    const px = e.clientX - box.left;
    const py = e.clientY - box.top;
    const factor = Math.exp(-e.deltaY * 0.0015);
    const scale = Math.min(8, Math.max(0.005, view.scale * factor));
    view.tx = px - ((px - view.tx) * scale) / view.scale;
    view.ty = py - ((py - view.ty) * scale) / view.scale;
    view.scale = scale;
    schedule();
  }, { passive: false });

  const search = document.getElementById("search");
  const searchCount = document.getElementById("search-count");
  search.addEventListener("input", () => {
    const q = search.value.trim().toLowerCase();
    matches = [];
    if (q) {
      for (let i = 0; i < nodes.length; i++) {
        const n = nodes[i];
        if (shown[n.phase] && (n.name.toLowerCase().includes(q) || n.op.toLowerCase().includes(q) || n.scope.toLowerCase().includes(q))) matches.push(i);
      }
    }
    matchAt = -1;
    searchCount.textContent = q ? `${matches.length} found` : "";
    schedule();
  });
  search.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || !matches.length) return;
    matchAt = (matchAt + 1) % matches.length;
    centreOn(matches[matchAt], Math.max(view.scale, 1));
    select(matches[matchAt]);
  });

  const toggles = document.getElementById("phase-toggles");
  for (const phase of ["forward", "backward", "optimizer"]) {
    if (!(phase in shown)) continue;
    const label = document.createElement("label");
    label.className = phase;
    label.innerHTML = `<input type="checkbox" checked data-phase="${esc(phase)}"> ${esc(phase)}`;
    label.firstChild.addEventListener("change", (e) => {
      shown[phase] = e.target.checked;
      if (selected >= 0 && !visible(selected)) select(-1);
      schedule();
    });
    toggles.appendChild(label);
  }
  document.getElementById("fit").addEventListener("click", fit);
  window.addEventListener("resize", resize);
  document.getElementById("graph-name").textContent = data.name;

  // for scripts and tests: where a node is on screen (CSS pixels), and the counters
  window.emberViewer = {
    stats,
    view,
    select: (name) => select(nodes.findIndex((n) => n.name === name)),
    centre: (name, scale) => centreOn(nodes.findIndex((n) => n.name === name), scale),
    screenPosition(name) {
      const n = nodes[nodes.findIndex((m) => m.name === name)];
      const box = canvas.getBoundingClientRect();
      return { x: box.left + n.x * view.scale + view.tx, y: box.top + (n.y + H / 2) * view.scale + view.ty };
    },
    setPhase(phase, on) {
      const box = toggles.querySelector(`input[data-phase="${phase}"]`);
      if (box && box.checked !== on) box.click();
    },
  };
  resize();
  fit();
})();
