// An SSE server that holds every stream open (bench/sse-llm.sh's hold mode): one event at once,
// then a comment every 5 s. Prints its port; node hold.mjs PORT.
import http from "node:http";

let open = 0;
const server = http.createServer((req, res) => {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  res.write("id: 1\ndata: hello\n\n");
  open++;
  const ping = setInterval(() => res.write(": ping\n\n"), 5000);
  req.on("close", () => {
    clearInterval(ping);
    open--;
  });
});
server.listen(Number(process.argv[2] || 0), "127.0.0.1", () => {
  console.log(JSON.stringify({ port: server.address().port }));
});
setInterval(() => console.log(JSON.stringify({ open })), 5000).unref();
