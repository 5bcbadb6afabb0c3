// The memory page's graph view: fetches /ui/api/graph, lays the nodes out with a small
// force simulation and draws SVG. Plain JS, no library, no network beyond this origin.
// Every label is written with textContent (memory text is untrusted and stays inert).
"use strict";
(function () {
  const box = document.getElementById("graph");
  if (!box) return;
  const NS = "http://www.w3.org/2000/svg";
  const W = 1200, H = 460;
  const focus = document.getElementById("graph-focus");
  let depth = parseInt(box.dataset.depth, 10) || 1;
  let current = box.dataset.ref;

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (parent) parent.appendChild(node);
    return node;
  }

  function pageUrl(ref) {
    return box.dataset.page + "?" + new URLSearchParams({ t: box.dataset.tenant, ref: ref }).toString();
  }

  function entityUrl(ref) {
    return box.dataset.entityPage + "?" + new URLSearchParams({ t: box.dataset.tenant, ref: ref }).toString();
  }

  function isMemory(n) { return n.kind === "AGENT_MEMORY" || n.kind === "EPISODE"; }

  function layout(nodes, edges, root) {
    // rings by depth as the start (deterministic), then a few hundred force steps
    const byDepth = {};
    nodes.forEach((n) => { (byDepth[n.depth] = byDepth[n.depth] || []).push(n); });
    Object.entries(byDepth).forEach(([d, list]) => {
      list.forEach((n, i) => {
        const a = (2 * Math.PI * i) / list.length + d * 0.7;
        const r = d * 160;
        n.x = W / 2 + r * Math.cos(a); n.y = H / 2 + r * Math.sin(a) * 0.8;
      });
    });
    const index = new Map(nodes.map((n) => [n.id, n]));
    const links = edges.map((e) => [index.get(e.source), index.get(e.target)]).filter((l) => l[0] && l[1]);
    for (let step = 0; step < 300; step++) {
      const t = 1 - step / 300;
      for (const a of nodes) { a.fx = 0; a.fy = 0; }
      for (let i = 0; i < nodes.length; i++) {
        for (let j = i + 1; j < nodes.length; j++) {
          const a = nodes[i], b = nodes[j];
          let dx = a.x - b.x, dy = a.y - b.y;
          const d2 = Math.max(dx * dx + dy * dy, 25);
          const f = 30000 / d2;
          const d = Math.sqrt(d2);
          dx /= d; dy /= d;
          a.fx += dx * f; a.fy += dy * f; b.fx -= dx * f; b.fy -= dy * f;
        }
      }
      for (const [a, b] of links) {
        const dx = b.x - a.x, dy = b.y - a.y;
        const d = Math.max(Math.sqrt(dx * dx + dy * dy), 1);
        const f = (d - 170) * 0.05;
        a.fx += (dx / d) * f; a.fy += (dy / d) * f; b.fx -= (dx / d) * f; b.fy -= (dy / d) * f;
      }
      for (const n of nodes) {
        if (n.id === root) { n.x = W / 2; n.y = H / 2; continue; }
        n.x += Math.max(-20, Math.min(20, n.fx * t)); n.y += Math.max(-20, Math.min(20, n.fy * t));
        n.x = Math.max(30, Math.min(W - 30, n.x)); n.y = Math.max(20, Math.min(H - 20, n.y));
      }
    }
    return links;
  }

  function draw(data) {
    box.textContent = "";
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", height: H, class: "graph", role: "img",
      "aria-label": "graph neighbourhood of " + data.root }, box);
    const links = layout(data.nodes, data.edges, data.root);
    data.edges.forEach((e, i) => {
      const l = links.find((p) => p[0].id === e.source && p[1].id === e.target) || links[i];
      if (!l) return;
      const line = el("line", { x1: l[0].x, y1: l[0].y, x2: l[1].x, y2: l[1].y, class: "edge " + e.kind }, svg);
      el("title", {}, line).textContent = `${e.source} ${e.kind} ${e.target}`;
    });
    for (const n of data.nodes) {
      const g = el("g", { class: "node " + n.kind + (n.type ? " type-" + n.type : "") + (n.id === data.root ? " root" : ""),
        transform: `translate(${n.x.toFixed(1)},${n.y.toFixed(1)})`, "data-id": n.id, tabindex: isMemory(n) ? 0 : -1 }, svg);
      const entity = n.kind === "ENTITY";
      if (isMemory(n)) el("circle", { r: n.id === data.root ? 11 : 8 }, g);
      else if (entity) el("rect", { x: -7, y: -7, width: 14, height: 14, transform: "rotate(45)" }, g);
      else el("rect", { x: -8, y: -8, width: 16, height: 16 }, g);
      const label = el("text", { x: 12, y: 4 }, g);
      label.textContent = (isMemory(n) ? n.id + " " : "") + (n.label || "").slice(0, 30);
      el("title", {}, g).textContent = `${n.id} · ${n.label || ""}`;
      if (isMemory(n)) {
        g.addEventListener("click", () => load(n.id));
        g.addEventListener("keydown", (ev) => { if (ev.key === "Enter") load(n.id); });
        g.addEventListener("dblclick", () => { window.location.href = pageUrl(n.id); });
      } else if (entity) {
        g.setAttribute("tabindex", "0");
        const go = () => { window.location.href = entityUrl(n.id); };
        g.addEventListener("click", go);
        g.addEventListener("keydown", (ev) => { if (ev.key === "Enter") go(); });
      }
    }
    const rootNode = data.nodes.find((n) => n.id === data.root);
    focus.textContent = "";
    const strong = document.createElement("b");
    strong.id = "graph-root";
    strong.textContent = data.root;
    focus.append("centred on ", strong, " · " + ((rootNode && rootNode.label) || "") + " · ");
    const open = document.createElement("a");
    open.href = pageUrl(data.root);
    open.id = "graph-open";
    open.textContent = "open this memory";
    focus.append(open, ` · ${data.nodes.length} nodes, ${data.edges.length} edges` +
      (data.truncated ? " (trimmed: the newest neighbours are shown)" : ""));
  }

  function load(ref) {
    current = ref;
    const url = box.dataset.api + "?" + new URLSearchParams({ t: box.dataset.tenant, ref: ref, depth: depth }).toString();
    box.setAttribute("aria-busy", "true");
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => r.json().then((body) => ({ ok: r.ok, body })))
      .then(({ ok, body }) => {
        box.removeAttribute("aria-busy");
        if (!ok) { box.textContent = (body.error && body.error.message) || "The graph could not be loaded."; return; }
        draw(body);
        box.dataset.current = body.root;
      });
  }

  document.querySelectorAll("#depths button").forEach((b) => {
    b.addEventListener("click", () => {
      depth = parseInt(b.dataset.depth, 10);
      document.querySelectorAll("#depths button").forEach((o) => o.classList.toggle("on", o === b));
      load(current);
    });
  });
  load(current);
})();
