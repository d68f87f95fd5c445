// The Meteor benchmark's method of loading a server: a headless browser per virtual user (one
// Chromium, a fresh context per user, as Artillery's Playwright engine runs them), arriving at a
// fixed rate, each doing the tasks page session that record.mjs records (add two tasks, remove
// one). Each page's DDP method latency is measured inside the page (method sent -> result), by a
// WebSocket wrapper installed before the page's scripts run. Prints one JSON document:
// {"users", "completed", "failed", "errors", "method_ms": [...], "connected_ms": [...]} (each user's
// time from its page's DDP connection up to the end of its session).
// Usage: node browsers.mjs http://127.0.0.1:PORT RATE SECONDS
import { chromium } from "playwright-core";
import { tasksSession } from "./tasks-session.mjs";

const [base, rateArg, secondsArg] = process.argv.slice(2);
const rate = Number(rateArg);
const seconds = Number(secondsArg);
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const browser = await chromium.launch({ executablePath, args: ["--no-sandbox", "--disable-gpu"] });

function timeMethods() {
  const Native = window.WebSocket;
  window.__methodMs = [];
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      const sent = new Map();
      const send = this.send.bind(this);
      this.send = (data) => {
        try {
          const m = JSON.parse(data);
          if (m.msg === "method") sent.set(m.id, performance.now());
        } catch {}
        return send(data);
      };
      this.addEventListener("message", (e) => {
        try {
          const m = JSON.parse(e.data);
          if (m.msg === "result" && sent.has(m.id)) {
            window.__methodMs.push(performance.now() - sent.get(m.id));
            sent.delete(m.id);
          }
        } catch {}
      });
    }
  };
}

async function user() {
  const context = await browser.newContext();
  try {
    await context.addInitScript(timeMethods);
    const page = await context.newPage();
    page.setDefaultTimeout(30000);
    const { connectedAt } = await tasksSession(page, base);
    return { ms: await page.evaluate(() => window.__methodMs), connected: Date.now() - connectedAt };
  } finally {
    await context.close();
  }
}

const result = { users: 0, completed: 0, failed: 0, errors: [], method_ms: [], connected_ms: [] };
const runs = [];
const total = Math.max(1, Math.round(rate * seconds));
const start = Date.now();
for (let i = 0; i < total; i++) {
  const due = start + (i * 1000) / rate;
  const wait = due - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  result.users++;
  runs.push(
    user().then(
      ({ ms, connected }) => {
        result.completed++;
        result.method_ms.push(...ms);
        result.connected_ms.push(connected);
      },
      (e) => {
        result.failed++;
        if (result.errors.length < 5) result.errors.push(String(e).split("\n")[0]);
      },
    ),
  );
}
await Promise.all(runs);
await browser.close();
console.log(JSON.stringify(result));
