// An SSE server that holds every stream open (tests/memory.rs, bench/sse-llm.sh): one event at once,
// then a comment every 5 s. Prints its port; node sse-hold.mjs PORT (0: any) [h2c: HTTP/2 in clear,
// by prior knowledge, instead of HTTP/1.1].
import http from "node:http";
import http2 from "node:http2";

const hold = (req, res) => {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  res.write("id: 1\ndata: hello\n\n");
  const ping = setInterval(() => res.write(": ping\n\n"), 5000);
  req.on("close", () => {
    clearInterval(ping);
  });
};
const server = process.argv[3] === "h2c" ? http2.createServer(hold) : http.createServer(hold);
server.listen(Number(process.argv[2] || 0), "127.0.0.1", () => {
  console.log(JSON.stringify({ port: server.address().port }));
});
