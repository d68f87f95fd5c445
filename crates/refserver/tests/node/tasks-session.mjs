// One user's session on the reference server's tasks page, as record.mjs records it and
// browsers.mjs repeats it: open the page, wait for DDP, add two tasks, remove the first, each
// action once the page shows the last one's effect. Returns {sessionId, connectedAt}.
export async function tasksSession(page, base) {
  await page.goto(base + "/");
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected");
  const connectedAt = Date.now();
  const sessionId = (await page.textContent("#sessionId")).trim();
  const row = (n) => page.locator("#tasks li", { hasText: `${sessionId} New Task ${n}` });
  await page.click("text=Add task");
  await row(1).waitFor({ state: "visible" });
  await page.click("text=Add task");
  await row(2).waitFor({ state: "visible" });
  await page.click("text=Remove task");
  await row(1).waitFor({ state: "detached" });
  return { sessionId, connectedAt };
}
