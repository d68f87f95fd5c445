// Conformance against third-party DDP clients: simpleddp and ddp.js over /websocket, node-ddp over
// SockJS (/sockjs/info, then /sockjs/NNN/xxxxxxxx/websocket). Each client connects, subscribes and
// sees documents, calls every method of the tasks app, and sees another client's insert and removal.
// Usage: node clients.mjs http://127.0.0.1:PORT   (prints one line per check; exit 1 on a failure)
import { createRequire } from "node:module";
import WebSocket from "ws";

const require = createRequire(import.meta.url);
const simpleDDP = require("simpleddp").default ?? require("simpleddp");
const DDPjs = require("ddp.js").default ?? require("ddp.js");
const NodeDDP = require("ddp");

const base = process.argv[2];
if (!base) { console.error("usage: node clients.mjs http://127.0.0.1:PORT"); process.exit(2); }
const wsUrl = base.replace(/^http/, "ws") + "/websocket";
const { hostname, port } = new URL(base);

const deadline = (ms, what) => new Promise((_, reject) => setTimeout(() => reject(new Error("timed out: " + what)), ms));
const within = (p, what, ms = 5000) => Promise.race([p, deadline(ms, what)]);
async function until(cond, what, ms = 5000) {
  const end = Date.now() + ms;
  while (Date.now() < end) { if (cond()) return; await new Promise(r => setTimeout(r, 10)); }
  throw new Error("timed out waiting for " + what);
}
let checks = 0;
function check(ok, what) {
  if (!ok) throw new Error("check failed: " + what);
  checks++;
  console.log("ok", what);
}

// Adapters: connect(), subscribe(name), call(method, arg), docs(), close().
const adapters = {
  async simpleddp() {
    const server = new simpleDDP({ endpoint: wsUrl, SocketConstructor: WebSocket, reconnectInterval: 60000 });
    await within(server.connect(), "simpleddp connect");
    return {
      async subscribe(name) { const sub = server.subscribe(name); await within(sub.ready(), "simpleddp ready"); },
      call: (method, arg) => within(server.call(method, arg), "simpleddp call " + method),
      // simpleddp keeps a document's id as `id`.
      docs: () => server.collection("taskCollection").fetch().map(d => ({ _id: d.id, ...d })),
      close: () => server.disconnect(),
    };
  },

  async "ddp.js"() {
    const ddp = new DDPjs({ endpoint: wsUrl, SocketConstructor: WebSocket, autoReconnect: false });
    const docs = new Map();
    const results = new Map();
    ddp.on("added", m => { if (m.collection === "taskCollection") docs.set(m.id, { _id: m.id, ...m.fields }); });
    ddp.on("changed", m => { const d = docs.get(m.id); if (d) { Object.assign(d, m.fields || {}); for (const k of m.cleared || []) delete d[k]; } });
    ddp.on("removed", m => { if (m.collection === "taskCollection") docs.delete(m.id); });
    ddp.on("result", m => results.set(m.id, m));
    const ready = new Set();
    ddp.on("ready", m => m.subs.forEach(s => ready.add(s)));
    await within(new Promise(resolve => ddp.on("connected", resolve)), "ddp.js connect");
    return {
      async subscribe(name) { const id = ddp.sub(name, []); await until(() => ready.has(id), "ddp.js ready"); },
      async call(method, arg) {
        const id = ddp.method(method, arg === undefined ? [] : [arg]);
        await until(() => results.has(id), "ddp.js result of " + method);
        const r = results.get(id);
        if (r.error) throw new Error(JSON.stringify(r.error));
        return r.result;
      },
      docs: () => Array.from(docs.values()),
      close: () => ddp.disconnect(),
    };
  },

  async "node-ddp (SockJS)"() {
    const client = new NodeDDP({ host: hostname, port: Number(port), ssl: false, autoReconnect: false,
      maintainCollections: true, ddpVersion: "1", useSockJs: true });
    await within(new Promise((resolve, reject) => client.connect(err => (err ? reject(err) : resolve()))), "node-ddp connect");
    return {
      subscribe: name => within(new Promise(resolve => client.subscribe(name, [], resolve)), "node-ddp ready"),
      call: (method, arg) => within(new Promise((resolve, reject) => {
        let result, gotResult = false, gotUpdated = false;
        const settle = () => gotResult && gotUpdated && resolve(result);
        client.call(method, arg === undefined ? [] : [arg],
          (err, r) => { if (err) return reject(new Error(JSON.stringify(err))); result = r; gotResult = true; settle(); },
          () => { gotUpdated = true; settle(); });
      }), "node-ddp call " + method),
      docs: () => Object.values(client.collections?.taskCollection ?? {}),
      close: () => client.close(),
    };
  },
};

async function scenario(name, writer) {
  const me = "client-" + name.replace(/\W/g, "");
  const seed = await writer.call("insertTask", { description: "seed for " + name, sessionId: "writer" });
  const c = await adapters[name]();
  await c.subscribe("fetchTasks");
  await until(() => c.docs().some(d => d._id === seed), name + " sees existing documents");
  check(true, `${name}: subscribe fetchTasks, sees the existing task`);
  const mine = await c.call("insertTask", { description: "mine", sessionId: me });
  check(typeof mine === "string" && mine.length === 17, `${name}: insertTask returns a 17-character id`);
  await until(() => c.docs().some(d => d._id === mine && d.description === "mine"), name + " sees own insert");
  const all = await c.call("fetchTasks");
  check(Array.isArray(all) && all.some(t => t._id === mine) && all.some(t => t._id === seed), `${name}: fetchTasks returns every task`);
  const own = all.find(t => t._id === mine);
  check(own.createdAt instanceof Date || typeof own.createdAt?.$date === "number", `${name}: createdAt arrives as an EJSON date`);
  check(await c.call("removeTask", { taskId: mine }) === 1, `${name}: removeTask returns 1`);
  await until(() => !c.docs().some(d => d._id === mine), name + " sees own removal");
  const other = await writer.call("insertTask", { description: "from the writer", sessionId: "writer" });
  await until(() => c.docs().some(d => d._id === other), name + " sees another client's insert");
  check(true, `${name}: sees another client's insert`);
  await writer.call("removeTask", { taskId: other });
  await until(() => !c.docs().some(d => d._id === other), name + " sees another client's removal");
  check(true, `${name}: sees another client's removal`);
  await c.call("insertTask", { description: "a", sessionId: me });
  await c.call("insertTask", { description: "b", sessionId: me });
  check(await c.call("removeAllTasks", { sessionId: me }) === 2, `${name}: removeAllTasks returns 2`);
  let failed = false;
  try { await c.call("noSuchMethod", {}); } catch (e) { failed = /404/.test(String(e.message)); }
  check(failed, `${name}: an unknown method fails with 404`);
  await writer.call("removeTask", { taskId: seed });
  c.close();
}

try {
  const writer = await adapters.simpleddp();
  for (const name of Object.keys(adapters)) await scenario(name, writer);
  writer.close();
  console.log(`${checks} passed, 0 failed`);
  process.exit(0);
} catch (e) {
  console.error("FAILED:", e.message);
  console.log(`${checks} passed, 1 failed`);
  process.exit(1);
}
