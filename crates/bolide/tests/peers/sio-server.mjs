// A Socket.IO 4 server for tests/realtime.rs: an echo, an acknowledgement, a broadcast room, and
// Artillery's own example namespace (/personalised); its own counts at GET /counts.
// Usage: node sio-server.mjs [PORT]   (prints {"port": N} once listening on 127.0.0.1)
import { createServer } from "node:http";
import { Server } from "socket.io";

const counts = {
  connections: 0, connected_now: 0, peak_connected: 0, upgrades: 0, by_transport: { polling: 0, websocket: 0 },
  namespaces: {}, received: {}, responses: 0, acks: 0, broadcasts: 0, delivered: 0, disconnects: {},
};
const bump = (o, k, n = 1) => { o[k] = (o[k] || 0) + n; };

const http = createServer((req, res) => {
  if (req.url === "/counts") {
    const body = JSON.stringify(counts);
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body), connection: "close" });
    res.end(body);
    return;
  }
  res.writeHead(404, { connection: "close" });
  res.end();
});
const io = new Server(http, { serveClient: false, cors: { origin: "*" } });

function watch(socket, nsp) {
  counts.connections++;
  counts.connected_now++;
  counts.peak_connected = Math.max(counts.peak_connected, counts.connected_now);
  bump(counts.namespaces, nsp);
  bump(counts.by_transport, socket.conn.transport.name);
  socket.conn.once("upgrade", () => counts.upgrades++);
  socket.onAny((event) => bump(counts.received, event));
  socket.on("disconnect", (reason) => { counts.connected_now--; bump(counts.disconnects, reason); });
}

io.on("connection", (socket) => {
  watch(socket, "/");
  if (socket.handshake.auth && socket.handshake.auth.token === "refuse") socket.disconnect(true);
  socket.on("echo", (...args) => { socket.emit("echoed", ...args); counts.responses++; });
  socket.on("ack", (arg, callback) => {
    if (typeof callback === "function") { callback({ ok: true, got: arg }); counts.acks++; }
  });
  socket.on("join", (room, callback) => {
    socket.join(room);
    if (typeof callback === "function") { callback("joined"); counts.acks++; }
  });
  socket.on("chat", (room, msg) => {
    const size = io.sockets.adapter.rooms.get(room)?.size || 0;
    io.to(room).emit("chat", msg);
    counts.broadcasts++;
    counts.delivered += size;
  });
  socket.on("whoami", (_, callback) => { if (typeof callback === "function") { callback({ query: socket.handshake.query, auth: socket.handshake.auth, header: socket.handshake.headers["x-client-id"] || null }); counts.acks++; } });
});

const personalised = io.of("/personalised");
personalised.on("connection", (socket) => {
  watch(socket, "/personalised");
  socket.on("echo", (msg) => { socket.emit("echoResponse", msg); counts.responses++; });
  socket.on("userDetails", (_, callback) => { callback({ name: "Artillery" }); counts.acks++; });
});

http.listen(Number(process.argv[2] || 0), "127.0.0.1", () => {
  console.log(JSON.stringify({ port: http.address().port }));
});
process.on("SIGTERM", () => process.exit(0));
