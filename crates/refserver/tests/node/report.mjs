// Opens a bolide HTML report from disk in headless Chromium (1200 x 900, as a laptop shows it)
// with every network request refused, and prints what a person sees as one JSON line:
// {"drawn": [[chart id, points]], "axes": [[chart id, x ticks, y ticks]], "painted": [[chart id,
// coloured pixels]], "firstScreen": {"title", "band": [[label, value, tone]], "verdicts": [...]},
// "tables": [{"header": [...], "rows": [[...]], "clipped": bool}], "toc": [...], "errors",
// "console", "requests"}. A screenshot of the first screen goes to the path given second, and of
// the whole page beside it (NAME-full.png).
// Usage: node report.mjs REPORT.html SCREENSHOT.png
import { chromium } from "playwright-core";
import { pathToFileURL } from "node:url";

const [file, shot] = process.argv.slice(2);
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const browser = await chromium.launch({ executablePath, args: ["--no-sandbox", "--disable-gpu"] });
try {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  const requests = [];
  const consoleErrors = [];
  // Everything but the file itself is refused (and recorded).
  const self = pathToFileURL(file).href;
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (url === self) return route.continue();
    requests.push(url);
    return route.abort();
  });
  page.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(m.text());
  });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  await page.goto(self, { waitUntil: "load" });
  await page.waitForFunction(() => document.body.dataset.drawn !== undefined, null, { timeout: 10000 });
  const drawn = JSON.parse(await page.evaluate(() => document.body.dataset.drawn));
  const errors = JSON.parse(await page.evaluate(() => document.body.dataset.errors || "[]"));
  const canvases = await page.evaluate(() => document.querySelectorAll("canvas").length);
  const axes = JSON.parse(await page.evaluate(() => document.body.dataset.axes || "[]"));
  const seen = await page.evaluate(() => {
    const inView = (e) => {
      const r = e.getBoundingClientRect();
      return r.width > 0 && r.top >= 0 && r.bottom <= window.innerHeight;
    };
    const text = (e) => (e ? e.textContent.trim() : "");
    const firstScreen = {
      title: text(document.querySelector("h1")),
      band: Array.from(document.querySelectorAll(".fact"))
        .filter(inView)
        .map((f) => [text(f.querySelector(".label")), text(f.querySelector(".value")), (f.className.match(/tone-(\w+)/) || [])[1]]),
      verdicts: Array.from(document.querySelectorAll("p.verdict")).filter(inView).map(text),
    };
    const tables = Array.from(document.querySelectorAll("table.data")).map((t) => {
      const wrap = t.parentElement;
      const style = getComputedStyle(wrap);
      return {
        header: Array.from(t.querySelectorAll("th")).map(text),
        rows: Array.from(t.querySelectorAll("tbody tr")).map((r) => Array.from(r.cells).map(text)),
        tones: Array.from(t.querySelectorAll("tbody tr")).map((r) =>
          Array.from(r.cells).map((c) => (c.className.match(/tone-(\w+)/) || [])[1])),
        // Wider than its box and not scrollable: clipped.
        clipped: wrap.scrollWidth > wrap.clientWidth + 1 && !/(auto|scroll)/.test(style.overflowX),
      };
    });
    // Every chart's canvas: how many pixels are not background (the lines, axes and labels drawn).
    const painted = Array.from(document.querySelectorAll("figure.chart")).map((f) => {
      const c = f.querySelector("canvas");
      if (!c) return [f.id, 0];
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
      return [f.id, n];
    });
    const toc = Array.from(document.querySelectorAll("nav.toc a")).map(text);
    return { firstScreen, tables, painted, toc };
  });
  if (shot) {
    await page.screenshot({ path: shot });
    await page.screenshot({ path: shot.replace(/\.png$/, "-full.png"), fullPage: true });
  }
  console.log(JSON.stringify({ drawn, axes, errors, console: consoleErrors, requests, canvases, ...seen }));
} finally {
  await browser.close();
}
