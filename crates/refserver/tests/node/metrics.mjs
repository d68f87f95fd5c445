// A plain Node HTTP server that exports Prometheus metrics with prom-client, as many Node servers
// do: GET /hit counts a hit (hits_total, by route) and observes its handling time in a histogram
// (hit_seconds, a fixed 3 ms per hit so that its quantiles are known); GET /metrics is the
// exposition text with prom-client's default process and Node.js metrics. Prints
// {"port": N} once listening on 127.0.0.1 (port 0: a free one).
// Usage: node metrics.mjs
import http from "node:http";
import client from "prom-client";

const register = new client.Registry();
client.collectDefaultMetrics({ register });
const hits = new client.Counter({ name: "hits_total", help: "Hits served.", labelNames: ["route"], registers: [register] });
const seconds = new client.Histogram({
  name: "hit_seconds",
  help: "Time to serve a hit.",
  buckets: [0.001, 0.002, 0.005, 0.01],
  registers: [register],
});

const server = http.createServer(async (req, res) => {
  if (req.url === "/metrics") {
    res.setHeader("Content-Type", register.contentType);
    res.end(await register.metrics());
  } else if (req.url === "/hit") {
    hits.inc({ route: "/hit" });
    seconds.observe(0.003);
    res.end("ok");
  } else {
    res.statusCode = 404;
    res.end();
  }
});
server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: server.address().port })));
