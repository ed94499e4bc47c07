// The roofline island: window.KPlayRoofline.render(containerEl, data) draws a
// log-log SVG chart of the device's ceilings and the runs of one kernel.
// No dependencies; all colours come from components.css through the page's
// CSS variables, so the chart follows the theme without re-rendering.
(function () {
  "use strict";

  const SVG_NS = "http://www.w3.org/2000/svg";
  const PREFIXES = [[1e18, "E"], [1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  const MIN_DECADES = 3;
  let serial = 0;

  // --- number formatting -------------------------------------------------

  function trimNumber(x) {
    if (x >= 10) return x.toFixed(0);
    if (x >= 1) return x.toFixed(1);
    return x.toPrecision(2);
  }

  // 4.3e12 -> "4.3 T"; the unit is appended by the caller.
  function si(value) {
    for (const [factor, prefix] of PREFIXES) {
      // 0.9995 so that 999.97e9 reads "1.0 T", not "1000 G".
      if (Math.abs(value) >= factor * 0.9995) return `${trimNumber(value / factor)} ${prefix}`;
    }
    return `${trimNumber(value)} `;
  }

  function intensityText(value) {
    if (value >= 1e4) return si(value).trim();
    if (value >= 100) return value.toFixed(0);
    if (value >= 10) return value.toFixed(1);
    return value.toPrecision(2);
  }

  // 10^exp as a tick label: 0.01, 1, 100, 1 k, 10 G, 1 T ...
  function decadeLabel(exp) {
    if (exp < 0) return (10 ** exp).toFixed(-exp);
    if (exp < 3) return String(10 ** exp);
    const group = Math.min(Math.floor(exp / 3) * 3, 18);
    const prefix = PREFIXES.find(([factor]) => factor === 10 ** group)[1];
    return `${10 ** (exp - group)} ${prefix}`;
  }

  // --- data ----------------------------------------------------------------

  function positive(x) {
    return typeof x === "number" && Number.isFinite(x) && x > 0;
  }

  function normalise(data) {
    const d = data || {};
    const points = Array.isArray(d.points) ? d.points : [];
    const plotted = points.filter(
      (p) => p && positive(p.intensity_flops_per_byte) && positive(p.flops_per_s),
    );
    return {
      device: String(d.device || "this device"),
      source: d.source === "calibrated" ? "calibrated" : "datasheet",
      memory: d.memory_bytes_per_s,
      compute: d.compute_flops_per_s,
      memoryName: String(d.memory_name || "DRAM"),
      computeName: String(d.compute_name || "compute"),
      points: plotted.map((p, i) => ({ ...p, index: i, label: String(p.label ?? `run ${i + 1}`) })),
      skipped: points.length - plotted.length,
    };
  }

  function roofAt(model, intensity) {
    return Math.min(model.compute, model.memory * intensity);
  }

  // Half-decade bounds around everything that must show, widened to MIN_DECADES.
  // Ticks stay on whole decades; the edges need not carry one.
  function decadeRange(values, padBelow, padAbove) {
    let lo = Math.floor(2 * Math.log10(Math.min(...values) / padBelow)) / 2;
    let hi = Math.ceil(2 * Math.log10(Math.max(...values) * padAbove)) / 2;
    let below = true;
    while (hi - lo < MIN_DECADES) {
      if (below) lo -= 0.5;
      else hi += 0.5;
      below = !below;
    }
    return [lo, hi];
  }

  function domain(model) {
    const ridge = model.compute / model.memory;
    const xs = [ridge, ...model.points.map((p) => p.intensity_flops_per_byte)];
    const [x0, x1] = decadeRange(xs, 3, 3);
    const ys = [model.compute, model.memory * 10 ** x0, ...model.points.map((p) => p.flops_per_s)];
    const [y0, y1] = decadeRange(ys, 1.5, 1.4);
    return { ridge, x0, x1, y0, y1 };
  }

  // --- SVG helpers -----------------------------------------------------

  function el(name, attrs, parent) {
    const node = document.createElementNS(SVG_NS, name);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    if (parent) parent.appendChild(node);
    return node;
  }

  function text(parent, attrs, content) {
    const node = el("text", attrs, parent);
    node.textContent = content;
    return node;
  }

  function layout(container) {
    const width = Math.round(Math.min(Math.max(container.clientWidth || 640, 320), 960));
    const height = Math.round(Math.min(Math.max(width * 0.58, 250), 520));
    const m = { left: 62, right: 22, top: 30, bottom: 50 };
    return { width, height, m, pw: width - m.left - m.right, ph: height - m.top - m.bottom };
  }

  function scales(box, dom) {
    const sx = (v) => box.m.left + ((Math.log10(v) - dom.x0) / (dom.x1 - dom.x0)) * box.pw;
    const sy = (v) => box.m.top + (1 - (Math.log10(v) - dom.y0) / (dom.y1 - dom.y0)) * box.ph;
    return { sx, sy };
  }

  // --- drawing -------------------------------------------------------------

  function drawAxes(svg, box, dom, s) {
    const grid = el("g", { class: "kp-rl-grid", "aria-hidden": "true" }, svg);
    const step = (n) => (n > 8 ? 2 : 1);
    const xStep = step(dom.x1 - dom.x0);
    const yStep = step(dom.y1 - dom.y0);
    const bottom = box.m.top + box.ph;
    for (let e = Math.ceil(dom.x0); e <= dom.x1; e += 1) {
      const x = s.sx(10 ** e);
      el("line", { class: "kp-rl-gridline", x1: x, x2: x, y1: box.m.top, y2: bottom }, grid);
      if ((e - Math.ceil(dom.x0)) % xStep === 0) {
        text(grid, { class: "kp-rl-tick", x, y: bottom + 17, "text-anchor": "middle" },
          decadeLabel(e));
      }
    }
    for (let e = Math.ceil(dom.y0); e <= dom.y1; e += 1) {
      const y = s.sy(10 ** e);
      el("line", { class: "kp-rl-gridline", x1: box.m.left, x2: box.m.left + box.pw, y1: y, y2: y },
        grid);
      if ((e - Math.ceil(dom.y0)) % yStep === 0) {
        text(grid, { class: "kp-rl-tick", x: box.m.left - 8, y: y + 4, "text-anchor": "end" },
          decadeLabel(e));
      }
    }
    el("rect", { class: "kp-rl-frame", x: box.m.left, y: box.m.top, width: box.pw, height: box.ph },
      grid);
    text(grid, { class: "kp-rl-axis-title", x: box.m.left + box.pw / 2, y: box.height - 10,
      "text-anchor": "middle" }, "arithmetic intensity (FLOP/byte)");
    const ty = box.m.top + box.ph / 2;
    text(grid, { class: "kp-rl-axis-title", x: 14, y: ty, "text-anchor": "middle",
      transform: `rotate(-90 14 ${ty})` }, "FLOP/s");
  }

  function drawRoofs(svg, box, dom, s, model) {
    const g = el("g", { class: "kp-rl-roofs", "aria-hidden": "true" }, svg);
    const xStart = 10 ** dom.x0;
    const xEnd = 10 ** dom.x1;
    const start = [s.sx(xStart), s.sy(model.memory * xStart)];
    const ridge = [s.sx(dom.ridge), s.sy(model.compute)];
    const end = [s.sx(xEnd), s.sy(model.compute)];
    const bottom = box.m.top + box.ph;
    el("path", { class: "kp-rl-region",
      d: `M${start} L${ridge} L${end} L${end[0]},${bottom} L${start[0]},${bottom} Z` }, g);
    el("path", { class: "kp-rl-roof kp-rl-roof-memory", d: `M${start} L${ridge}` }, g);
    el("path", { class: "kp-rl-roof kp-rl-roof-compute", d: `M${ridge} L${end}` }, g);
    el("line", { class: "kp-rl-ridge-drop", x1: ridge[0], x2: ridge[0], y1: ridge[1], y2: bottom },
      g);
    el("circle", { class: "kp-rl-ridge", cx: ridge[0], cy: ridge[1], r: 4 }, g);
    const ridgeText = `ridge ${intensityText(dom.ridge)} FLOP/B`;
    const rightHalf = ridge[0] > box.m.left + box.pw * 0.7;
    text(g, { class: "kp-rl-ridge-label", x: ridge[0] + (rightHalf ? -6 : 6), y: bottom - 8,
      "text-anchor": rightHalf ? "end" : "start" }, ridgeText);

    // The memory roof has slope 1 in decades; on screen that is this angle.
    const angle = (Math.atan2(box.ph / (dom.y1 - dom.y0), box.pw / (dom.x1 - dom.x0)) * 180)
      / Math.PI;
    const lx = start[0] + 10;
    const ly = start[1] - (10 * Math.tan((angle * Math.PI) / 180)) - 7;
    text(g, { class: "kp-rl-roof-label", x: lx, y: ly, transform: `rotate(${-angle} ${lx} ${ly})` },
      `${model.memoryName} ${si(model.memory)}B/s`);
    text(g, { class: "kp-rl-roof-label", x: end[0] - 6, y: end[1] - 8, "text-anchor": "end" },
      `${model.computeName} ${si(model.compute)}FLOP/s`);
  }

  function pointFacts(model, p) {
    const roof = roofAt(model, p.intensity_flops_per_byte);
    const bound = model.memory * p.intensity_flops_per_byte < model.compute
      ? model.memoryName : model.computeName;
    const facts = [
      ["intensity", `${intensityText(p.intensity_flops_per_byte)} FLOP/byte`],
      ["achieved", `${si(p.flops_per_s)}FLOP/s`],
    ];
    // The page may already say how close the run is to its roof.
    const hasRoof = detailRows(p).some(([k]) => /roof/i.test(k));
    if (!hasRoof) {
      facts.push(["of roof", `${Math.round((100 * p.flops_per_s) / roof)}% (${bound} bound)`]);
    }
    return facts;
  }

  function detailRows(p) {
    const details = p.details && typeof p.details === "object" ? p.details : {};
    return Object.entries(details).map(([k, v]) => [String(k), String(v)]);
  }

  function pointSummary(model, p, mentionCurrent = true) {
    const facts = pointFacts(model, p).map(([k, v]) => `${k} ${v}`);
    const extra = detailRows(p).map(([k, v]) => `${k} ${v}`);
    const prefix = p.current && mentionCurrent ? "current run, " : "";
    return `${prefix}${p.label}: ${[...facts, ...extra].join("; ")}`;
  }

  function drawPoints(svg, box, s, model) {
    const g = el("g", { class: "kp-rl-points", role: "list", "aria-label": "runs" }, svg);
    // Earlier runs underneath, the current one on top.
    const ordered = [...model.points].sort((a, b) => Number(!!a.current) - Number(!!b.current));
    return ordered.map((p) => {
      const x = s.sx(p.intensity_flops_per_byte);
      const y = s.sy(p.flops_per_s);
      const node = el("g", { class: `kp-rl-point${p.current ? " is-current" : ""}`,
        role: "listitem", tabindex: -1, "data-index": p.index,
        "aria-label": pointSummary(model, p) }, g);
      if (p.current) {
        const roofY = s.sy(roofAt(model, p.intensity_flops_per_byte));
        if (roofY < y - 8) {
          el("line", { class: "kp-rl-headroom", x1: x, x2: x, y1: y - 8, y2: roofY }, node);
        }
        el("circle", { class: "kp-rl-halo", cx: x, cy: y, r: 11 }, node);
      }
      el("circle", { class: "kp-rl-dot", cx: x, cy: y, r: p.current ? 6 : 4.5 }, node);
      el("circle", { class: "kp-rl-hit", cx: x, cy: y, r: 12 }, node);
      if (p.current) {
        // Text width is estimated (no layout yet): about 0.6 em per character.
        const left = x + 14 + p.label.length * 7.2 > box.m.left + box.pw;
        text(node, { class: "kp-rl-point-label", x: x + (left ? -14 : 14), y: y + 4,
          "text-anchor": left ? "end" : "start" }, p.label);
      }
      return { node, point: p, x, y };
    });
  }

  // --- tooltip and keyboard ------------------------------------------------

  function fillTooltip(tip, model, p) {
    tip.replaceChildren();
    const head = document.createElement("strong");
    head.textContent = p.label;
    const list = document.createElement("dl");
    for (const [k, v] of [...pointFacts(model, p), ...detailRows(p)]) {
      const dt = document.createElement("dt");
      dt.textContent = k;
      const dd = document.createElement("dd");
      dd.textContent = v;
      list.append(dt, dd);
    }
    tip.append(head, list);
  }

  function placeTooltip(wrapper, tip, target) {
    tip.hidden = false;
    const host = wrapper.getBoundingClientRect();
    const dot = target.getBoundingClientRect();
    const cx = dot.left + dot.width / 2 - host.left;
    const cy = dot.top + dot.height / 2 - host.top;
    const tw = tip.offsetWidth;
    const th = tip.offsetHeight;
    let left = cx + 14;
    if (left + tw > host.width - 4) left = Math.max(4, cx - 14 - tw);
    const top = Math.min(Math.max(4, cy - th / 2), Math.max(4, host.height - th - 4));
    tip.style.left = `${Math.round(left)}px`;
    tip.style.top = `${Math.round(top)}px`;
  }

  function wireInteraction(wrapper, tip, model, items) {
    const byIntensity = [...items].sort(
      (a, b) => a.point.intensity_flops_per_byte - b.point.intensity_flops_per_byte,
    );
    // One tab stop for the whole chart; arrow keys move between runs.
    const first = items.find((it) => it.point.current) || items[items.length - 1];
    if (first) first.node.setAttribute("tabindex", "0");
    const show = (it) => {
      fillTooltip(tip, model, it.point);
      it.node.setAttribute("aria-describedby", tip.id);
      it.node.classList.add("is-active");
      placeTooltip(wrapper, tip, it.node.querySelector(".kp-rl-dot"));
    };
    const hide = (it) => {
      tip.hidden = true;
      it.node.removeAttribute("aria-describedby");
      it.node.classList.remove("is-active");
    };
    for (const it of items) {
      it.node.addEventListener("pointerenter", () => show(it));
      it.node.addEventListener("pointerleave", () => {
        if (document.activeElement !== it.node) hide(it);
      });
      it.node.addEventListener("click", () => it.node.focus());
      it.node.addEventListener("focus", () => show(it));
      it.node.addEventListener("blur", () => hide(it));
      it.node.addEventListener("keydown", (event) => {
        if (event.key === "Escape") return hide(it);
        const delta = { ArrowRight: 1, ArrowUp: 1, ArrowLeft: -1, ArrowDown: -1 }[event.key];
        if (!delta) return undefined;
        event.preventDefault();
        const at = byIntensity.indexOf(it);
        const next = byIntensity[Math.min(Math.max(at + delta, 0), byIntensity.length - 1)];
        it.node.setAttribute("tabindex", "-1");
        next.node.setAttribute("tabindex", "0");
        next.node.focus();
        return undefined;
      });
    }
  }

  // --- public entry ----------------------------------------------------------

  function describe(model, dom) {
    const current = model.points.find((p) => p.current);
    const parts = [
      "Log-log roofline chart.",
      `Memory roof ${model.memoryName} ${si(model.memory)}B/s;`,
      `compute roof ${model.computeName} ${si(model.compute)}FLOP/s;`,
      `ridge point at ${intensityText(dom.ridge)} FLOP/byte.`,
      `${model.points.length} run${model.points.length === 1 ? "" : "s"} plotted.`,
    ];
    if (current) parts.push(`Current run ${pointSummary(model, current, false)}.`);
    return parts.join(" ");
  }

  function noteText(model) {
    const base = model.source === "calibrated"
      ? `ceilings: calibrated on ${model.device}`
      : `datasheet values for ${model.device}`;
    if (!model.skipped) return base;
    const runs = `${model.skipped} run${model.skipped === 1 ? "" : "s"}`;
    return `${base} · ${runs} without a timing not shown`;
  }

  function draw(container, data) {
    const model = normalise(data);
    const wrapper = document.createElement("figure");
    wrapper.className = "kp-roofline";
    if (!positive(model.memory) || !positive(model.compute)) {
      const p = document.createElement("p");
      p.className = "kp-rl-note";
      p.textContent = `No roofline: the ceilings of ${model.device} are unknown.`;
      wrapper.append(p);
      return wrapper;
    }
    const id = `kp-rl-${++serial}`;
    const box = layout(container);
    const dom = domain(model);
    const s = scales(box, dom);
    const svg = el("svg", { class: "kp-rl-svg", viewBox: `0 0 ${box.width} ${box.height}`,
      role: "group", "aria-labelledby": `${id}-title`, "aria-describedby": `${id}-desc` });
    el("title", { id: `${id}-title` }, svg).textContent = `Roofline of ${model.device}`;
    el("desc", { id: `${id}-desc` }, svg).textContent = describe(model, dom);
    drawAxes(svg, box, dom, s);
    drawRoofs(svg, box, dom, s, model);
    const items = drawPoints(svg, box, s, model);
    const tip = document.createElement("div");
    tip.className = "kp-rl-tooltip";
    tip.id = `${id}-tip`;
    tip.setAttribute("role", "tooltip");
    tip.hidden = true;
    const note = document.createElement("figcaption");
    note.className = "kp-rl-note";
    note.textContent = noteText(model);
    wrapper.append(svg, tip, note);
    wireInteraction(wrapper, tip, model, items);
    return wrapper;
  }

  // Keeps keyboard focus on the same run when a redraw replaces the nodes.
  function refocus(wrapper, index) {
    const target = wrapper.querySelector(`.kp-rl-point[data-index="${index}"]`);
    if (!target) return;
    for (const node of wrapper.querySelectorAll(".kp-rl-point")) {
      node.setAttribute("tabindex", "-1");
    }
    target.setAttribute("tabindex", "0");
    target.focus();
  }

  function render(container, data) {
    if (!(container instanceof Element)) {
      throw new TypeError("KPlayRoofline.render needs an element");
    }
    const previous = container.kplayRoofline;
    let focusedIndex = null;
    if (previous) {
      const active = document.activeElement;
      if (active && previous.wrapper.contains(active)) focusedIndex = active.dataset.index;
      previous.observer?.disconnect();
      previous.wrapper.remove();
    }
    const state = { data, width: container.clientWidth, wrapper: draw(container, data) };
    // The container belongs to the chart: a placeholder inside it goes too.
    container.replaceChildren(state.wrapper);
    if (focusedIndex != null) refocus(state.wrapper, focusedIndex);
    // Redraw at the new width so text keeps its size when the column changes.
    if (typeof ResizeObserver === "function") {
      let pending = 0;
      state.observer = new ResizeObserver(() => {
        if (Math.abs(container.clientWidth - state.width) < 24 || pending) return;
        pending = requestAnimationFrame(() => {
          pending = 0;
          if (container.kplayRoofline === state) render(container, state.data);
        });
      });
      state.observer.observe(container);
    }
    container.kplayRoofline = state;
    return state.wrapper;
  }

  function clear(container) {
    const previous = container && container.kplayRoofline;
    if (!previous) return;
    previous.observer?.disconnect();
    previous.wrapper.remove();
    delete container.kplayRoofline;
  }

  window.KPlayRoofline = Object.freeze({ render, clear, formatSI: si });
})();
