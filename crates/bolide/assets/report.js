// bolide's HTML report: draws the charts of REPORT (built by crates/bolide/src/report/charts.rs)
// with uPlot. Hover shows values in the legend, dragging zooms (double-click resets), clicking a
// legend entry hides or shows its series. When done, <body data-drawn> holds [[chart id, points
// drawn], ...] in page order and <body data-errors> any error, for the tests. The live dashboard
// (live.js) calls window.bolideReport.render with each new snapshot; it redraws the page.
"use strict";
(function () {
  // Okabe-Ito: told apart by readers with any common colour-vision deficiency, and in grey print.
  const PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"];
  const DASHES = [[], [6, 3], [2, 2], [8, 3, 2, 3]];
  const errors = [];
  let drawn = [];
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
    if (chart.empty) {
      fig.appendChild(el("p", { class: "empty" }, "No data: " + chart.empty + "."));
      drawn.push([chart.id, 0]);
      return;
    }
    const percentile = chart.x_kind === "percentile";
    const named = chart.x_kind === "label";
    const nameOf = (v) => (chart.x_names || [])[Math.round(v) - 1] || "";
    const xValue = (v) =>
      v == null ? "-" : percentile ? percentileLabel(v) : named ? nameOf(v) : chart.x_kind === "seconds" ? number(v) + " s" : number(v);
    const series = [{ label: chart.x_label, value: (u, v) => xValue(v) }];
    chart.series.forEach((s, i) => {
      const colour = PALETTE[i % PALETTE.length];
      const points = s.style === "points" || s.style === "dots";
      const bars = s.style === "bars";
      series.push({
        label: s.label,
        stroke: colour,
        fill: bars ? colour + "cc" : undefined,
        width: points ? 0 : bars ? 1 : 1.5,
        dash: DASHES[Math.floor(i / PALETTE.length) % DASHES.length],
        // Few x values (runs, labels, levels): the points of a line are marked, so that a lone
        // value between gaps still shows.
        points: points
          ? { show: true, size: s.style === "dots" ? 3 : 7, fill: colour, stroke: colour }
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
      label: percentile ? "percentile" : chart.x_label,
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
            : { time: false },
        // Bars stand on zero.
        y: chart.series.some((s) => s.style === "bars") ? { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } : {},
      },
      axes: [
        xAxis,
        { label: chart.y_label, size: 60 },
      ],
      cursor: { drag: { x: true, y: false } },
      legend: { live: true },
    };
    const plot = new uPlot(opts, data, fig);
    // The plotting area leaves room under it for the x axis (its ticks and name).
    if (plot.bbox.height / uPlot.pxRatio > opts.height - 30) errors.push("chart " + chart.id + ": its x axis is not drawn");
    plots.push([plot, box]);
    drawn.push([chart.id, chart.series.reduce((k, s) => k + s.values.filter((v) => v != null).length, 0)]);
  }

  function section(s, main, n) {
    const sec = el("section", { class: "run" });
    sec.appendChild(el("h2", {}, s.title));
    if (s.notes.length) {
      const ul = el("ul", { class: "notes" });
      for (const n of s.notes) {
        const li = el("li", {}, n);
        if (n.startsWith("suspect") || n.startsWith("interrupted")) li.className = "warn";
        ul.appendChild(li);
      }
      sec.appendChild(ul);
    }
    if (s.text) sec.appendChild(el("pre", { class: "summary" }, s.text));
    const charts = el("div", { class: "charts" });
    sec.appendChild(charts);
    main.appendChild(sec);
    for (const c of s.charts) {
      try {
        draw(c, charts, n);
      } catch (e) {
        errors.push(c.id + ": " + e);
      }
    }
  }

  window.addEventListener("resize", () => plots.forEach(([p, box]) => p.setSize({ width: chartWidth(box), height: 300 })));
  window.addEventListener("beforeprint", () => plots.forEach(([p]) => p.setSize({ width: 680, height: 260 })));

  function render(report) {
    plots.forEach(([p]) => p.destroy());
    plots = [];
    drawn = [];
    const main = document.getElementById("report");
    main.textContent = "";
    report.sections.forEach((s, n) => section(s, main, n));
    let foot = document.querySelector("footer");
    if (!foot) {
      foot = el("footer");
      document.body.appendChild(foot);
    }
    foot.textContent =
      "Written by " + report.tool + ". Drag across a chart to zoom, double-click to reset, click a legend entry to hide or show it.";
    document.body.dataset.drawn = JSON.stringify(drawn);
    document.body.dataset.errors = JSON.stringify(errors);
  }

  window.bolideReport = { render: render };
  if (typeof REPORT !== "undefined") render(REPORT);
})();
