// Records a user's session on the tasks page as a HAR with Playwright's recordHar (WebSocket
// frames embedded), in Debian's headless Chromium: add two tasks, remove one. Prints one JSON line
// {"sessionId": the page's own id, "rows": tasks seen}.
// Usage: node record.mjs http://127.0.0.1:PORT [OUT.har] (without OUT.har nothing is recorded by the
// browser: the page may be reached through bolide's recording proxy instead).
import { chromium } from "playwright-core";
import { tasksSession } from "./tasks-session.mjs";

const [base, har] = process.argv.slice(2);
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const browser = await chromium.launch({ executablePath, args: ["--no-sandbox", "--disable-gpu"] });
try {
  const context = await browser.newContext(har ? { recordHar: { path: har, content: "embed" } } : {});
  const page = await context.newPage();
  page.setDefaultTimeout(10000);
  const { sessionId } = await tasksSession(page, base);
  const rows = await page.locator("#tasks li").count();
  // Closing the context writes the HAR, the WebSocket's frames with it.
  await context.close();
  console.log(JSON.stringify({ sessionId, rows }));
} finally {
  await browser.close();
}
