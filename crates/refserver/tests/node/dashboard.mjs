// Opens bolide's live dashboard in headless Chromium while a run goes on, with every request to
// another origin refused, and prints one JSON line: {"updates": the most snapshots the live page
// had drawn, "midRun": what the live page showed at its second snapshot ({"band": [[label,
// value]], "drawn", "axes"}), "final": the final report's URL, "drawn": what the final report
// drew, "errors", "console", "requests"}. Waits at most 60 s for the run to end. A screenshot of
// the live page at that moment goes to the path given second, if any.
// Prints "launched" on stderr once the browser is up, so that bolide can be started then.
// Usage: node dashboard.mjs http://127.0.0.1:PORT/ [SCREENSHOT.png]
import { chromium } from "playwright-core";

const [url, shot] = process.argv.slice(2);
const origin = new URL(url).origin;
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const browser = await chromium.launch({ executablePath, args: ["--no-sandbox", "--disable-gpu"] });
try {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  console.error("launched");
  const requests = [];
  const consoleErrors = [];
  await context.route("**/*", (route) => {
    const u = route.request().url();
    if (u.startsWith(origin + "/")) return route.continue();
    requests.push(u);
    return route.abort();
  });
  page.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(m.text());
  });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  // bolide may not be listening yet: the page is opened as soon as it is.
  for (let tries = 0; ; tries++) {
    try {
      await page.goto(url, { waitUntil: "load" });
      break;
    } catch (e) {
      if (tries > 200) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  // The live page counts its snapshots until the run ends and it moves to the final report.
  let updates = 0;
  let midRun = null;
  const until = Date.now() + 60000;
  while (Date.now() < until && !page.url().endsWith("/report")) {
    try {
      const n = await page.evaluate(() => Number(document.body.dataset.updates || 0));
      updates = Math.max(updates, n);
      if (n >= 2 && !midRun) {
        await new Promise((r) => setTimeout(r, 50));
        midRun = await page.evaluate(() => ({
          band: Array.from(document.querySelectorAll(".fact")).map((f) => [
            f.querySelector(".label").textContent,
            f.querySelector(".value").textContent,
          ]),
          drawn: JSON.parse(document.body.dataset.drawn || "[]"),
          axes: JSON.parse(document.body.dataset.axes || "[]"),
        }));
        if (shot) await page.screenshot({ path: shot });
      }
    } catch (e) {
      // The page is navigating to the final report.
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await page.waitForFunction(() => document.body.dataset.drawn !== undefined && !("updates" in document.body.dataset), null, {
    timeout: 15000,
  });
  const drawn = JSON.parse(await page.evaluate(() => document.body.dataset.drawn));
  const errors = JSON.parse(await page.evaluate(() => document.body.dataset.errors || "[]"));
  console.log(JSON.stringify({ updates, midRun, final: page.url(), drawn, errors, console: consoleErrors, requests }));
} finally {
  await browser.close();
}
