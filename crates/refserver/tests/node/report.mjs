// Opens a bolide HTML report from disk in headless Chromium with every network request refused,
// and prints what the page drew as one JSON line: {"drawn": {chart id: points}, "errors": [...],
// "console": [...], "requests": [...]}. A screenshot goes to the path given second.
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
  if (shot) await page.screenshot({ path: shot, fullPage: true });
  console.log(JSON.stringify({ drawn, errors, console: consoleErrors, requests, canvases }));
} finally {
  await browser.close();
}
