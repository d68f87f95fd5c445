// Hostile servers for tests/hostile_peers.rs, one behaviour per mode, each on the real npm
// packages (socket.io 4, ws 8) so that what bolide meets is what such a server sends:
//   sio-flood    answers `echo` with 64 KB `echoed` events that do not match ({ count: N } of
//                them, then one that does; -1: no end)
//   sio-secrets  refuses every CONNECT with an error that repeats the auth payload, the query
//                and the Authorization and Cookie headers
//   sio-foreign  sends 50 `tick` events on a namespace the user never joined, then 2 on its own
//   sio-dies     closes the connection 300 ms after a `bye` event, disconnects the user on
//                purpose 300 ms after a `leave`
//   sio-burst    as the user disconnects, writes 2,000 events into the pending poll, or 5
//                binary frames on its WebSocket
//   sio-noprobe  offers the upgrade, opens the WebSocket and never answers its probe
//   gql-secrets  a graphql-transport-ws server that closes every connection_init with a reason
//                repeating connectionParams' token and the Authorization header, and answers a
//                subscribe with an error repeating them all (Cookie included)
//   ddp-secrets  a DDP server refusing every `login` with a reason that repeats its parameters
// Usage: node hostile.mjs PORT MODE   (prints {"port": N} once listening on 127.0.0.1)
import { createServer } from "node:http";
import { createHash } from "node:crypto";
import { Server } from "socket.io";
import { WebSocketServer } from "ws";

const mode = process.argv[3];
const counts = { connections: 0, foreign_sent: 0, own_sent: 0, flood_sent: 0, probes_unanswered: 0 };

const http = createServer((req, res) => {
  if (req.url === "/counts") {
    const body = JSON.stringify(counts);
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body), connection: "close" });
    res.end(body);
    return;
  }
  if (!req.url.startsWith("/socket.io")) {
    res.writeHead(404, { connection: "close" });
    res.end();
  }
});

if (mode.startsWith("sio-")) {
  const io = new Server(http, { serveClient: false, maxHttpBufferSize: 1e6 });
  if (mode === "sio-secrets") {
    io.use((socket, next) => {
      const h = socket.handshake;
      next(new Error(`denied: auth ${JSON.stringify(h.auth)} query token ${h.query.token} authorization ${h.headers.authorization} cookie ${h.headers.cookie}`));
    });
  }
  io.on("connection", (socket) => {
    counts.connections++;
    if (mode === "sio-flood") {
      // `echo` with { count: N }: N events that do not answer, then { done: true }; -1: no end.
      const pad = "x".repeat(64 * 1024);
      socket.on("echo", (arg) => {
        const count = (arg && arg.count) ?? -1;
        let n = 0;
        const tick = setInterval(() => {
          if (!socket.connected) return clearInterval(tick);
          // Only while the transport keeps up: the server's own buffer stays small.
          if (socket.conn.writeBuffer.length > 64) return;
          for (let i = 0; i < 16; i++) {
            if (count >= 0 && n >= count) { socket.emit("echoed", { done: true }); return clearInterval(tick); }
            socket.emit("echoed", { n: n++, pad });
            counts.flood_sent++;
          }
        }, 2);
        socket.on("disconnect", () => clearInterval(tick));
      });
    }
    if (mode === "sio-foreign") {
      setTimeout(() => {
        // Engine.IO message packets written as they are: events on /elsewhere, which this
        // client never joined, then two on its own namespace.
        for (let i = 0; i < 50; i++) { socket.conn.write(`2/elsewhere,["tick",${i}]`); counts.foreign_sent++; }
        for (let i = 0; i < 2; i++) { socket.emit("tick", i); counts.own_sent++; }
      }, 100);
    }
    if (mode === "sio-dies") {
      // `bye`: the connection dropped (its transport closed); `leave`: the server ends the
      // session on purpose (Socket.IO's DISCONNECT).
      socket.on("bye", () => setTimeout(() => socket.conn.close(), 300));
      socket.on("leave", () => setTimeout(() => socket.disconnect(true), 300));
    }
    if (mode === "sio-burst") {
      // As the user's namespace disconnect arrives (before its Engine.IO close, in the same
      // POST; Engine.IO's message event comes at once, socket.io's own a tick later, after the
      // close), 2,000 events written into the poll that is pending, in one answer.
      socket.conn.on("message", (data) => {
        if (data !== "1" || socket.conn.transport.name !== "polling") return;
        for (let i = 0; i < 2000; i++) socket.conn.writeBuffer.push({ type: "message", data: `2["b",${i}]` });
        counts.burst_sent = (counts.burst_sent || 0) + 2000;
        socket.conn.flush();
      });
      // Five binary frames as the user's namespace disconnect arrives, before its close.
      socket.conn.on("message", (data) => {
        if (data !== "1" || socket.conn.transport.name !== "websocket") return;
        for (let i = 0; i < 5; i++) socket.conn.writeBuffer.push({ type: "message", data: Buffer.from([i, 1, 2, 3]) });
        socket.conn.flush();
        counts.binary_sent = (counts.binary_sent || 0) + 5;
      });
    }
    socket.on("ack", (arg, cb) => { if (typeof cb === "function") cb({ ok: true }); });
  });
  if (mode === "sio-noprobe") {
    // Engine.IO's own upgrade handler is taken away: the WebSocket opens and hears nothing back.
    http.removeAllListeners("upgrade");
    http.on("upgrade", (req, sock) => {
      const accept = createHash("sha1").update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
      sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
      counts.probes_unanswered++;
      sock.on("data", () => {});
      sock.on("error", () => {});
    });
  }
} else if (mode === "gql-secrets") {
  const wss = new WebSocketServer({ server: http, path: "/graphql", handleProtocols: () => "graphql-transport-ws" });
  wss.on("connection", (ws, req) => {
    counts.connections++;
    let params = null;
    ws.on("message", (data) => {
      const m = JSON.parse(String(data));
      if (m.type === "connection_init") {
        params = m.payload;
        if (m.payload && m.payload.close) {
          // A close reason is at most 123 bytes: the token and the header's secret part.
          ws.close(4403, `Forbidden ${m.payload.token} ${req.headers.authorization}`.slice(0, 120));
        } else ws.send(JSON.stringify({ type: "connection_ack" }));
      }
      if (m.type === "subscribe") {
        const message = `denied for ${JSON.stringify({ params, authorization: req.headers.authorization, cookie: req.headers.cookie })}`;
        ws.send(JSON.stringify({ id: m.id, type: "error", payload: [{ message }] }));
      }
    });
  });
} else if (mode === "ddp-secrets") {
  const wss = new WebSocketServer({ server: http, path: "/websocket" });
  wss.on("connection", (ws) => {
    counts.connections++;
    ws.on("message", (data) => {
      const m = JSON.parse(String(data));
      if (m.msg === "connect") ws.send(JSON.stringify({ msg: "connected", session: "s" + counts.connections }));
      if (m.msg === "ping") ws.send(JSON.stringify({ msg: "pong", id: m.id }));
      if (m.msg === "method") {
        const reason = `no such user for ${JSON.stringify(m.params)}`;
        ws.send(JSON.stringify({ msg: "result", id: m.id, error: { isClientSafe: true, error: 403, reason, message: `${reason} [403]`, errorType: "Meteor.Error" } }));
        ws.send(JSON.stringify({ msg: "updated", methods: [m.id] }));
      }
    });
  });
}

http.listen(Number(process.argv[2] || 0), "127.0.0.1", () => {
  console.log(JSON.stringify({ port: http.address().port }));
});
process.on("SIGTERM", () => process.exit(0));
