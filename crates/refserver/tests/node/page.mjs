// The tasks page in headless Chromium (Debian's, driven by playwright-core): click "Add task", the
// task appears; "Remove task", it disappears; the No Reactive view fetches with a method instead.
// Usage: node page.mjs http://127.0.0.1:PORT [screenshot.png]
import { chromium } from "playwright-core";

const base = process.argv[2];
const shot = process.argv[3];
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const browser = await chromium.launch({ executablePath, args: ["--no-sandbox", "--disable-gpu"] });
let failed = false;
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(10000);
  await page.goto(base + "/");
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected");
  const sid = (await page.textContent("#sessionId")).trim();
  if (sid.length !== 17) throw new Error("session id shown: " + sid);
  const row = n => page.locator("#tasks li", { hasText: `${sid} New Task ${n}` });
  await page.click("text=Add task");
  await row(1).waitFor({ state: "visible" });
  await page.click("text=Add task");
  await row(2).waitFor({ state: "visible" });
  console.log("ok add task: rows 1 and 2 visible");
  await page.click("text=Remove task");
  await row(1).waitFor({ state: "detached" });
  console.log("ok remove task: row 1 gone, row 2 stays", await row(2).count());
  await page.check("#nonreactive");
  await page.click("text=Add task");
  await row(3).waitFor({ state: "visible" });
  console.log("ok no-reactive view: row 3 from fetchTasks");
  if (shot) await page.screenshot({ path: shot, fullPage: true });
  await page.click("text=Remove all tasks");
  await page.locator("#tasks li.own").first().waitFor({ state: "detached" });
  console.log("ok remove all tasks");
  console.log("4 passed, 0 failed");
} catch (e) {
  failed = true;
  console.error("FAILED:", e.message);
  console.log("0 passed, 1 failed");
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
