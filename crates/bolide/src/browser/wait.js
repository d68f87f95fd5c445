// Waits in the page until `sel` shows what a step asks (a count, a text, a state), at most `ms`
// milliseconds; answers what it saw last. Arguments: selector, count|null, text|null, state, ms.
(async (sel, count, text, state, ms) => {
  const visible = (e) => {
    const r = e.getBoundingClientRect();
    const s = getComputedStyle(e);
    return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.display !== "none";
  };
  const look = () => {
    let all;
    try {
      all = Array.from(document.querySelectorAll(sel));
    } catch (e) {
      return { bad: String(e && e.message) };
    }
    const shown = state === "attached" ? all : all.filter(visible);
    if (state === "hidden") return { ok: shown.length === 0, n: shown.length };
    if (count !== null) return { ok: shown.length === count, n: shown.length };
    if (text !== null) {
      const t = shown.length ? shown[0].textContent : null;
      return { ok: t !== null && t.includes(text), n: shown.length, text: t === null ? null : t.slice(0, 200) };
    }
    return { ok: shown.length > 0, n: shown.length };
  };
  const end = performance.now() + ms;
  for (;;) {
    const r = look();
    if (r.ok || r.bad || performance.now() >= end) return JSON.stringify(r);
    await new Promise((done) => setTimeout(done, 10));
  }
})
