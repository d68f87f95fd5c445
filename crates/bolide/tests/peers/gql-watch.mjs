// An independent graphql-ws client (the library's own createClient, on ws): subscribes to
// taskAdded, says "subscribed", then counts the tasks it is pushed and their fan-out latency
// (now less the task's createdAt). Ends after N tasks or 30 s; prints {"tasks", "p50_us"}.
// Usage: node gql-watch.mjs ws://127.0.0.1:PORT/graphql N
import { createClient } from "graphql-ws";
import WebSocket from "ws";

const [url, want] = [process.argv[2], Number(process.argv[3] || 1)];
const client = createClient({ url, webSocketImpl: WebSocket, connectionParams: { token: "secret" }, lazy: false });
const lags = [];
const done = () => {
  lags.sort((a, b) => a - b);
  const p50 = lags.length ? lags[Math.floor((lags.length - 1) / 2)] : null;
  console.log(JSON.stringify({ tasks: lags.length, p50_us: p50 }));
  client.dispose();
  process.exit(0);
};
setTimeout(done, 30_000);
client.subscribe(
  { query: "subscription { taskAdded { id createdAt } }" },
  {
    next: (r) => {
      lags.push(Math.max(1, Math.round((Date.now() - r.data.taskAdded.createdAt) * 1000)));
      if (lags.length >= want) done();
    },
    error: (e) => { console.error(e); process.exit(1); },
    complete: () => {},
  },
);
// The subscription is the server's before the query sent after it is answered.
await client.iterate({ query: "{ hello }" }).next();
await new Promise((r) => setTimeout(r, 100));
console.log("subscribed");
