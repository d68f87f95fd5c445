// A graphql-ws server (graphql-ws 6 on ws 8, graphql 16) for tests/realtime.rs: tasks added by a
// mutation and pushed to every `taskAdded` subscription; connection_init must carry
// { token: "secret" }; its own counts at GET /counts.
// Usage: node gql-server.mjs [PORT]   (prints {"port": N} once listening on 127.0.0.1)
import { createServer } from "node:http";
import { WebSocketServer } from "ws";
import { useServer } from "graphql-ws/use/ws";
import { buildSchema } from "graphql";

const schema = buildSchema(`
  type Task { id: ID!, text: String!, createdAt: Float! }
  type Query { tasks: [Task!]!, hello: String! }
  type Mutation { addTask(text: String!): Task! }
  type Subscription { taskAdded: Task! }
`);

const counts = { connections: 0, refused: 0, subscriptions: 0, queries: 0, mutations: 0, nexts: 0, completes: 0 };
const tasks = [];
const listeners = new Set();

// An async iterator that yields each task added while it is open.
function taskFeed() {
  const queue = [];
  let wake = null;
  const push = (t) => { queue.push(t); if (wake) { wake(); wake = null; } };
  listeners.add(push);
  return {
    [Symbol.asyncIterator]() { return this; },
    async next() {
      while (queue.length === 0) await new Promise((r) => (wake = r));
      return { value: { taskAdded: queue.shift() }, done: false };
    },
    async return() { listeners.delete(push); return { value: undefined, done: true }; },
  };
}

const roots = {
  query: { tasks: () => tasks, hello: () => "world" },
  mutation: {
    addTask: ({ text }) => {
      const t = { id: String(tasks.length + 1), text, createdAt: Date.now() };
      tasks.push(t);
      for (const l of listeners) l(t);
      return t;
    },
  },
  subscription: { taskAdded: () => taskFeed() },
};

const http = createServer((req, res) => {
  if (req.url === "/counts") {
    const body = JSON.stringify({ ...counts, tasks: tasks.length });
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body), connection: "close" });
    res.end(body);
    return;
  }
  res.writeHead(404, { connection: "close" });
  res.end();
});
const wss = new WebSocketServer({ server: http, path: "/graphql" });
useServer(
  {
    schema,
    roots,
    onConnect: (ctx) => {
      if (!ctx.connectionParams || ctx.connectionParams.token !== "secret") { counts.refused++; return false; }
      counts.connections++;
      return true;
    },
    onSubscribe: (_ctx, _id, payload) => {
      const q = payload.query.trim();
      if (q.startsWith("subscription")) counts.subscriptions++;
      else if (q.startsWith("mutation")) counts.mutations++;
      else counts.queries++;
    },
    onNext: () => { counts.nexts++; },
    onComplete: () => { counts.completes++; },
  },
  wss,
);

http.listen(Number(process.argv[2] || 0), "127.0.0.1", () => {
  console.log(JSON.stringify({ port: http.address().port }));
});
process.on("SIGTERM", () => process.exit(0));
