// Opens bolide's live dashboard in headless Chromium while a run goes on, with every request to
// another origin refused, and prints one JSON line: {"updates": the most snapshots the live page
// had drawn, "final": the final report's URL, "drawn": what the final report drew, "errors",
// "console", "requests"}. Waits at most 60 s for the run to end.
// Prints "launched" on stderr once the browser is up, so that bolide can be started then.
// Usage: node dashboard.mjs http://127.0.0.1:PORT/
import { chromium } from "playwright-core";

const [url] = process.argv.slice(2);
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
  const until = Date.now() + 60000;
  while (Date.now() < until && !page.url().endsWith("/report")) {
    try {
      const n = await page.evaluate(() => Number(document.body.dataset.updates || 0));
      updates = Math.max(updates, n);
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
  console.log(JSON.stringify({ updates, final: page.url(), drawn, errors, console: consoleErrors, requests }));
} finally {
  await browser.close();
}
