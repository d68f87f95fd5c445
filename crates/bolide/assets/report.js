// bolide's HTML report: the summary band, the tables (crates/bolide/src/report/blocks.rs) and the
// charts of REPORT (crates/bolide/src/report/charts.rs, drawn with uPlot), with a table of
// contents; every section folds. Hover shows values in the legend, dragging zooms (double-click
// resets), clicking a legend entry hides or shows its series, clicking a column's heading sorts a
// table. When done, <body data-drawn> holds [[chart id, points drawn], ...] in page order,
// <body data-axes> [[chart id, x ticks, y ticks], ...] and <body data-errors> any error, for the
// tests. The live dashboard (live.js) calls window.bolideReport.render with each new snapshot.
"use strict";
(function () {
  // Okabe-Ito (told apart by readers with any common colour-vision deficiency, and in grey print),
  // its pale yellow left out and its sky blue and orange darkened for contrast on white.
  const PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#B07800", "#3A8DBF", "#000000"];
  // The least span of a y axis by unit, so that a flat line is drawn flat (24.006-24.014 MB is
  // noise, not a jump); every y axis starts at zero.
  function minSpan(label) {
    if (/%/.test(label)) return 5;
    if (/MB/.test(label)) return 10;
    return 1e-9;
  }
  const DASHES = [[], [6, 3], [2, 2], [8, 3, 2, 3]];
  const errors = [];
  let drawn = [];
  let axes = [];
  let plots = [];
  window.addEventListener("error", (e) => {
    errors.push(String(e.message));
    document.body.dataset.errors = JSON.stringify(errors);
  });

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // x = 1 / (1 - q) -> "99.9%"
  function percentileLabel(x) {
    if (x <= 1) return "0%";
    const p = 100 * (1 - 1 / x);
    const digits = Math.max(0, Math.min(4, Math.ceil(Math.log10(x)) - 2));
    return p.toFixed(digits) + "%";
  }

  function number(v) {
    if (v == null) return "-";
    const a = Math.abs(v);
    if (a >= 100) return v.toFixed(0);
    if (a >= 10) return v.toFixed(1);
    if (a >= 1) return v.toFixed(2);
    return v.toFixed(3);
  }

  function chartWidth(box) {
    return Math.max(320, Math.min(box.clientWidth || 900, 1100));
  }

  function draw(chart, box, n) {
    const fig = el("figure", { class: "chart", id: "chart-" + n + "-" + chart.id });
    fig.appendChild(el("figcaption", {}, chart.title));
    box.appendChild(fig);
    const percentile = chart.x_kind === "percentile";
    const named = chart.x_kind === "label";
    const nameOf = (v) => (chart.x_names || [])[Math.round(v) - 1] || "";
    const seconds = chart.x_kind === "seconds";
    // A run shorter than a second is drawn in milliseconds, over one second (never 0 to 100 s).
    const xs = chart.x.filter((v) => v != null);
    const short = seconds && xs.length > 0 && Math.max(...xs) - Math.min(...xs) < 1;
    const secondsText = (v) => (short ? (v * 1000).toFixed(0) + " ms" : number(v) + " s");
    const xValue = (v) =>
      v == null ? "-" : percentile ? percentileLabel(v) : named ? nameOf(v) : seconds ? secondsText(v) : number(v);
    const series = [{ label: chart.x_label, value: (u, v) => xValue(v) }];
    chart.series.forEach((s, i) => {
      // A series that means a verdict comes with its tone's colour.
      const colour = (chart.colours || [])[i] || PALETTE[i % PALETTE.length];
      const points = s.style === "points" || s.style === "dots";
      const bars = s.style === "bars";
      // Thousands of dots: translucent, so that where they pile up reads darker (density).
      const dense = s.style === "dots" && s.values.length > 3000;
      const dotColour = dense ? colour + "40" : colour;
      series.push({
        label: s.label,
        stroke: colour,
        fill: bars ? colour + "cc" : undefined,
        width: points ? 0 : bars ? 1 : 1.5,
        dash: DASHES[Math.floor(i / PALETTE.length) % DASHES.length],
        // Few x values (runs, labels, levels): the points of a line are marked, so that a lone
        // value between gaps still shows.
        points: points
          ? { show: true, size: s.style === "dots" ? 3 : 7, fill: dotColour, stroke: dotColour, width: dense ? 0 : 1 }
          : bars
            ? { show: false }
            : { show: chart.x_kind !== "seconds" && chart.x_kind !== "percentile", size: 6, fill: colour, stroke: colour },
        paths: points ? () => null : bars ? uPlot.paths.bars({ size: [0.6, 80] }) : undefined,
        // Spectra of several steps share x values each has only some of: join their points.
        spanGaps: percentile || named,
        value: (u, v) => number(v),
      });
    });
    const data = [chart.x].concat(chart.series.map((s) => s.values));
    const xAxis = {
      label: percentile ? "percentile" : short ? "milliseconds since the start" : chart.x_label,
      // 0%, 50%, 90%, 99%, 99.9%, ... as far as the data reaches.
      splits: percentile
        ? (u, i, min, max) => [1, 2, 10, 100, 1e3, 1e4, 1e5, 1e6].filter((v) => v >= min && v <= max * 1.0001)
        : chart.x_kind === "run" || chart.x_kind === "level" || named
          ? (u, i, min, max) => chart.x.filter((v) => v >= min && v <= max)
          : undefined,
      // uPlot labels only powers of ten on a log axis unless told otherwise; 2 is the median.
      filter: percentile ? (u, splits) => splits : undefined,
      values: percentile
        ? (u, splits) => splits.map(percentileLabel)
        : short
          ? (u, splits) => splits.map((v) => (v * 1000).toFixed(0) + " ms")
        : named
          ? (u, splits) => splits.map((v) => {
              const n = nameOf(v);
              return n.length > 28 ? n.slice(0, 27) + "…" : n;
            })
          : undefined,
      // Names slant so that long ones (steps) do not overlap.
      rotate: named ? -35 : 0,
      size: named ? 130 : undefined,
    };
    // An option set to undefined would replace uPlot's default (an axis of size undefined is not
    // drawn): leave those out.
    for (const k of Object.keys(xAxis)) if (xAxis[k] === undefined) delete xAxis[k];
    const opts = {
      width: chartWidth(box),
      height: 300,
      series: series,
      scales: {
        x: percentile
          ? { time: false, distr: 3, log: 10 }
          : named || chart.x_kind === "run"
            ? { time: false, range: (u, min, max) => [min - 0.5, max + 0.5] }
            : seconds
              ? { time: false, range: (u, min, max) => (max - min < 1 ? [min, min + 1] : [min, max]) }
              : { time: false },
        // Every y axis stands on zero, and spans at least its unit's least span.
        y: {
          range: (u, min, max) => {
            const top = max == null || !isFinite(max) ? 1 : max;
            return [0, Math.max(top * 1.1, minSpan(chart.y_label), 1e-9)];
          },
        },
      },
      axes: [
        xAxis,
        { label: chart.y_label, size: 60 },
      ],
      cursor: { drag: { x: true, y: false } },
      legend: { live: true },
    };
    // A page read without a pointer (a static report, a print, a screenshot) shows the last
    // point's values in the legend rather than uPlot's "-" for every series, and so does the
    // legend once the pointer leaves the chart.
    const last = () => {
      for (let i = data[0].length - 1; i >= 0; i--) if (data.some((s, k) => k > 0 && s[i] != null)) return i;
      return null;
    };
    const showLast = (u) => {
      const i = last();
      if (i != null && u.cursor.idx == null) u.setLegend({ idx: i });
    };
    opts.hooks = { ready: [showLast], setCursor: [showLast] };
    // Slanted names run right of their tick: room for the last one.
    if (named) opts.padding = [null, 70, null, null];
    const plot = new uPlot(opts, data, fig);
    // The plotting area leaves room under it for the x axis (its ticks and name).
    if (plot.bbox.height / uPlot.pxRatio > opts.height - 30) errors.push("chart " + chart.id + ": its x axis is not drawn");
    plots.push([plot, box]);
    drawn.push([chart.id, chart.series.reduce((k, s) => k + s.values.filter((v) => v != null).length, 0)]);
    axes.push([chart.id, plot]);
  }

  // The ticks each chart's axes were drawn with (uPlot lays them out when it draws).
  function axesDrawn() {
    const ticks = (a) => (a && a._values ? a._values.length : 0);
    return axes.map(([id, plot]) => [id, ticks(plot.axes[0]), ticks(plot.axes[1])]);
  }

  // A figure of the band: label, value, a line under it; its tone as a colour and a mark.
  const MARK = { good: "✓ ", bad: "✗ ", warn: "! " };
  function band(facts) {
    const box = el("div", { class: "band" });
    for (const f of facts) {
      const tone = f.tone || "plain";
      const d = el("div", { class: "fact tone-" + tone });
      d.appendChild(el("div", { class: "label" }, f.label));
      d.appendChild(el("div", { class: "value" }, (MARK[tone] || "") + f.value));
      if (f.detail) d.appendChild(el("div", { class: "detail" }, f.detail));
      box.appendChild(d);
    }
    return box;
  }

  // The number a cell starts with ("1,234.5 ms", "-28.1%"), for sorting; null when it has none.
  function cellNumber(text) {
    const m = /^[-+]?[\d,]*\.?\d+/.exec(String(text).trim());
    return m ? parseFloat(m[0].replace(/,/g, "")) : null;
  }

  function table(t) {
    const wrap = el("div", { class: "table-wrap" });
    const tab = el("table", { class: "data" });
    const head = el("tr");
    const body = el("tbody");
    t.header.forEach((h, i) => {
      const th = el("th", { class: t.numeric[i] ? "num" : "" }, h);
      th.title = "sort by " + (h || "this column");
      let up = true;
      th.addEventListener("click", () => {
        const rows = Array.from(body.rows);
        rows.sort((a, b) => {
          const x = a.cells[i].textContent, y = b.cells[i].textContent;
          const nx = cellNumber(x), ny = cellNumber(y);
          const c = nx != null && ny != null ? nx - ny : x.localeCompare(y);
          return up ? c : -c;
        });
        up = !up;
        rows.forEach((r) => body.appendChild(r));
      });
      head.appendChild(th);
    });
    const thead = el("thead");
    thead.appendChild(head);
    tab.appendChild(thead);
    t.rows.forEach((r, ri) => {
      const tr = el("tr");
      r.forEach((c, ci) => {
        const tone = ((t.tones || [])[ri] || [])[ci] || "plain";
        tr.appendChild(el("td", { class: (t.numeric[ci] ? "num " : "") + "tone-" + tone }, c));
      });
      body.appendChild(tr);
    });
    tab.appendChild(body);
    wrap.appendChild(tab);
    return wrap;
  }

  function block(b, box) {
    if (b.kind === "heading") box.appendChild(el(b.level <= 2 ? "h3" : "h4", {}, b.text));
    else if (b.kind === "text") box.appendChild(el("p", {}, b.text));
    else if (b.kind === "lines") {
      if (!b.lines.length) return;
      const p = el("p", { class: "lines" });
      b.lines.forEach((l, i) => {
        if (i) p.appendChild(el("br"));
        p.appendChild(document.createTextNode(l));
      });
      box.appendChild(p);
    } else if (b.kind === "list") {
      const ul = el("ul");
      for (const i of b.items) ul.appendChild(el("li", {}, i));
      box.appendChild(ul);
    } else if (b.kind === "verdict") {
      const p = el("p", { class: "verdict tone-" + (b.tone || "plain") });
      p.appendChild(el("strong", {}, (MARK[b.tone] || "") + b.head));
      p.appendChild(document.createTextNode(b.rest));
      box.appendChild(p);
    } else if (b.kind === "table") box.appendChild(table(b.table));
  }

  function section(s, main, n) {
    // Every section folds; a run among many starts folded.
    const sec = el("details", { class: "section kind-" + (s.kind || "other"), id: "s" + n });
    if (!s.folded) sec.open = true;
    const sum = el("summary");
    sum.appendChild(el("h2", {}, s.title));
    sec.appendChild(sum);
    if (s.band && s.band.length) sec.appendChild(band(s.band));
    if (s.notes.length) {
      const ul = el("ul", { class: "notes" });
      for (const n of s.notes) {
        const li = el("li", {}, n);
        if (n.startsWith("suspect") || n.startsWith("interrupted")) li.className = "warn";
        ul.appendChild(li);
      }
      sec.appendChild(ul);
    }
    for (const b of s.blocks || []) block(b, sec);
    if (s.text) {
      if (s.blocks && s.blocks.length) {
        const d = el("details", { class: "terminal" });
        d.appendChild(el("summary", {}, "As the terminal printed it"));
        d.appendChild(el("pre", { class: "summary" }, s.text));
        sec.appendChild(d);
      } else sec.appendChild(el("pre", { class: "summary" }, s.text));
    }
    const charts = el("div", { class: "charts" });
    sec.appendChild(charts);
    main.appendChild(sec);
    // Charts with nothing to draw are left out, named in one line with the reason.
    const empty = s.charts.filter((c) => c.empty);
    let group = null;
    for (const c of s.charts.filter((c) => !c.empty)) {
      // Charts of a group (a server's internals) under their own heading.
      if (c.group && c.group !== group) charts.appendChild(el("h3", { class: "chart-group" }, c.group));
      group = c.group || null;
      try {
        draw(c, charts, n);
      } catch (e) {
        errors.push(c.id + ": " + e);
      }
    }
    if (empty.length) {
      charts.appendChild(el("p", { class: "empty" }, "Not drawn: " + empty.map((c) => c.title + " (" + c.empty + ")").join("; ") + "."));
    }
  }

  // The table of contents: one link per section, after the first (the summary).
  function contents(report, main) {
    if (report.sections.length < 3) return;
    const nav = el("nav", { class: "toc" });
    nav.appendChild(el("strong", {}, "Contents"));
    const ol = el("ol");
    report.sections.forEach((s, n) => {
      const li = el("li");
      const a = el("a", { href: "#s" + n }, s.title);
      a.addEventListener("click", () => {
        const d = document.getElementById("s" + n);
        if (d) d.open = true;
      });
      li.appendChild(a);
      ol.appendChild(li);
    });
    nav.appendChild(ol);
    const first = main.firstChild;
    main.insertBefore(nav, first ? first.nextSibling : null);
  }

  window.addEventListener("resize", () => plots.forEach(([p, box]) => p.setSize({ width: chartWidth(box), height: 300 })));
  window.addEventListener("beforeprint", () => plots.forEach(([p]) => p.setSize({ width: 680, height: 260 })));

  function render(report) {
    plots.forEach(([p]) => p.destroy());
    plots = [];
    drawn = [];
    axes = [];
    const main = document.getElementById("report");
    main.textContent = "";
    report.sections.forEach((s, n) => section(s, main, n));
    contents(report, main);
    let foot = document.querySelector("footer");
    if (!foot) {
      foot = el("footer");
      document.body.appendChild(foot);
    }
    foot.textContent =
      "Written by " + report.tool + ". Drag across a chart to zoom, double-click to reset, click a legend entry to hide or show it.";
    // Once uPlot has drawn (after this task): what was drawn, for the tests.
    setTimeout(() => {
      document.body.dataset.axes = JSON.stringify(axesDrawn());
      document.body.dataset.errors = JSON.stringify(errors);
      document.body.dataset.drawn = JSON.stringify(drawn);
    }, 0);
  }

  window.bolideReport = { render: render };
  if (typeof REPORT !== "undefined") render(REPORT);
})();
