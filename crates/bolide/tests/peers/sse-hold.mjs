// An SSE server that holds every stream open (tests/memory.rs, bench/sse-llm.sh): one event at once,
// then a comment every 5 s. Prints its port; node sse-hold.mjs PORT (0: any) [h2c: HTTP/2 in clear,
// by prior knowledge, instead of HTTP/1.1]. Over h2c, GET /reset sends events 1 and 2 and then resets
// the stream (RST_STREAM, INTERNAL_ERROR); asked again with Last-Event-ID, it sends events 3 to 5
// and ends the stream (tests/sse.rs); GET /goaway sends events 1 and 2, ends the connection
// (GOAWAY) and then the stream, and resumes as /reset does. GET /counts over HTTP/1.1 answers the connections (HTTP/2
// sessions) and requests it has seen; in h2c mode on a port of its own, printed as counts_port.
import http from "node:http";
import http2 from "node:http2";

const h2c = process.argv[3] === "h2c";
let connections = 0;
let requests = 0;

const hold = (req, res) => {
  if (req.url === "/counts" && !req.stream) {
    // Over HTTP/1.1, this request's own connection is one of them.
    const body = JSON.stringify({ connections: connections - (h2c ? 0 : 1), requests });
    res.writeHead(200, { "content-type": "application/json", "content-length": body.length, connection: "close" });
    res.end(body);
    return;
  }
  requests++;
  const cut = req.stream && ["/goaway", "/reset"].find((p) => req.url.startsWith(p));
  if (cut) {
    res.writeHead(200, { "content-type": "text/event-stream" });
    if (req.headers["last-event-id"]) {
      for (const i of [3, 4, 5]) res.write(`id: ${i}\ndata: ${i}\n\n`);
      res.end();
    } else if (cut === "/goaway") {
      // Events 1 and 2, the connection's end (GOAWAY: no new stream on it), then the stream's.
      res.write("id: 1\ndata: 1\n\nid: 2\ndata: 2\n\n", () => {
        req.stream.session.goaway();
        setTimeout(() => res.end(), 20);
      });
    } else {
      res.write("id: 1\ndata: 1\n\nid: 2\ndata: 2\n\n", () =>
        setTimeout(() => req.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR), 20),
      );
    }
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  res.write("id: 1\ndata: hello\n\n");
  const ping = setInterval(() => res.write(": ping\n\n"), 5000);
  req.on("close", () => {
    clearInterval(ping);
  });
};
let server;
if (h2c) {
  server = http2.createServer(hold);
  server.on("session", () => connections++);
  // GET /counts over HTTP/1.1 on a port of its own, said beside the server's.
  const counting = http.createServer(hold);
  counting.listen(0, "127.0.0.1", () => {
    server.listen(Number(process.argv[2] || 0), "127.0.0.1", () => {
      console.log(JSON.stringify({ port: server.address().port, counts_port: counting.address().port }));
    });
  });
} else {
  server = http.createServer(hold);
  server.on("connection", () => connections++);
  server.listen(Number(process.argv[2] || 0), "127.0.0.1", () => {
    console.log(JSON.stringify({ port: server.address().port }));
  });
}
