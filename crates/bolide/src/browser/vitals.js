// bolide's page timings, added to every document a browser user opens before the page's own
// scripts run: the Performance APIs' paint, largest-contentful-paint, layout-shift and event
// entries, kept in window.__bolideVitals for bolide to read when the page is left.
(() => {
  if (window.__bolideVitals) return;
  const v = (window.__bolideVitals = { fcp: null, lcp: null, cls: 0, inp: null, interactions: 0 });
  const observers = [];
  const observe = (type, each, extra) => {
    try {
      const o = new PerformanceObserver((list) => list.getEntries().forEach(each));
      o.observe(Object.assign({ type, buffered: true }, extra || {}));
      observers.push([o, each]);
    } catch (e) {
      // An entry type this browser does not have: that timing stays null.
    }
  };
  // Entries queued for an observer's next callback, taken now (bolide reads when it leaves).
  window.__bolideVitalsFlush = () => {
    for (const [o, each] of observers) o.takeRecords().forEach(each);
    return v;
  };
  observe("paint", (e) => {
    if (e.name === "first-contentful-paint") v.fcp = e.startTime;
  });
  observe("largest-contentful-paint", (e) => {
    v.lcp = e.startTime;
  });
  // CLS: the largest session window of shifts (gaps under 1 s, windows under 5 s), shifts right
  // after an input left out.
  let win = 0, first = 0, last = 0;
  observe("layout-shift", (e) => {
    if (e.hadRecentInput) return;
    if (win > 0 && e.startTime - last < 1000 && e.startTime - first < 5000) {
      win += e.value;
    } else {
      win = e.value;
      first = e.startTime;
    }
    last = e.startTime;
    v.cls = Math.max(v.cls, win);
  });
  // INP: each interaction's longest event; the worst one, or the 98th percentile from 50 on.
  const interactions = new Map();
  const interaction = (e) => {
    const id = e.interactionId || (e.entryType === "first-input" ? "first" : 0);
    if (!id) return;
    interactions.set(id, Math.max(interactions.get(id) || 0, e.duration));
    const worst = Array.from(interactions.values()).sort((a, b) => b - a);
    v.inp = worst[Math.min(worst.length - 1, Math.floor(worst.length / 50))];
    v.interactions = interactions.size;
  };
  observe("event", interaction, { durationThreshold: 16 });
  observe("first-input", interaction);
})();
