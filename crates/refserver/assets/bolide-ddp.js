// A small DDP client for the browser: connect, heartbeats, methods (resolved once both `result`
// and `updated` arrived, as Meteor's client does), subscriptions, and a local collection cache that
// applies added/changed/removed (with `cleared`) and EJSON dates.
(function (global) {
  "use strict";
  const UNMISTAKABLE = "23456789ABCDEFGHJKLMNPQRSTWXYZabcdefghijkmnopqrstuvwxyz";

  function randomId() {
    const bytes = new Uint8Array(17);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, b => UNMISTAKABLE[b % UNMISTAKABLE.length]).join("");
  }

  function fromEJSON(v) {
    if (Array.isArray(v)) return v.map(fromEJSON);
    if (v && typeof v === "object") {
      const keys = Object.keys(v);
      if (keys.length === 1 && keys[0] === "$date") return new Date(v.$date);
      if (keys.length === 1 && keys[0] === "$escape") v = v.$escape;
      const out = {};
      for (const k of Object.keys(v)) out[k] = fromEJSON(v[k]);
      return out;
    }
    return v;
  }

  class Connection {
    constructor(url) {
      this.url = url;
      this.nextMethodId = 1;
      this.methods = new Map();   // id -> {resolve, reject, result, error, gotResult, gotUpdated}
      this.subs = new Map();      // id -> {name, params, ready}
      this.collections = new Map();
      this.onChange = () => {};
      this.onStatus = () => {};
      this.queue = [];
      this.open();
    }

    open() {
      this.ws = new WebSocket(this.url);
      this.connected = false;
      this.ws.onopen = () => this.raw({ msg: "connect", version: "1", support: ["1", "pre2", "pre1"] });
      this.ws.onmessage = e => this.receive(JSON.parse(e.data));
      this.ws.onclose = () => {
        this.connected = false;
        this.onStatus("disconnected");
        setTimeout(() => this.open(), 1000);
      };
    }

    raw(msg) { this.ws.send(JSON.stringify(msg)); }

    send(msg) {
      if (this.connected) this.raw(msg); else this.queue.push(msg);
    }

    collection(name) {
      if (!this.collections.has(name)) this.collections.set(name, new Map());
      return this.collections.get(name);
    }

    receive(m) {
      if (!m.msg) return; // legacy greeting
      switch (m.msg) {
        case "connected":
          this.connected = true;
          this.onStatus("connected");
          this.collections.clear();
          for (const [id, s] of this.subs) this.raw({ msg: "sub", id, name: s.name, params: s.params });
          for (const q of this.queue.splice(0)) this.raw(q);
          break;
        case "failed": this.onStatus("failed: server wants DDP " + m.version); break;
        case "ping": this.raw(m.id ? { msg: "pong", id: m.id } : { msg: "pong" }); break;
        case "added": {
          const doc = Object.assign({ _id: m.id }, fromEJSON(m.fields || {}));
          this.collection(m.collection).set(m.id, doc);
          this.onChange();
          break;
        }
        case "changed": {
          const doc = this.collection(m.collection).get(m.id);
          if (doc) {
            Object.assign(doc, fromEJSON(m.fields || {}));
            for (const k of m.cleared || []) delete doc[k];
            this.onChange();
          }
          break;
        }
        case "removed": this.collection(m.collection).delete(m.id); this.onChange(); break;
        case "ready": for (const id of m.subs) { const s = this.subs.get(id); if (s) s.ready = true; } break;
        case "nosub": this.subs.delete(m.id); break;
        case "result": {
          const c = this.methods.get(m.id);
          if (c) { c.gotResult = true; c.error = m.error; c.result = fromEJSON(m.result); this.settle(m.id); }
          break;
        }
        case "updated":
          for (const id of m.methods) { const c = this.methods.get(id); if (c) { c.gotUpdated = true; this.settle(id); } }
          break;
        case "error": console.warn("DDP error", m.reason, m.offendingMessage); break;
      }
    }

    settle(id) {
      const c = this.methods.get(id);
      if (!c.gotResult || !c.gotUpdated) return;
      this.methods.delete(id);
      if (c.error) c.reject(Object.assign(new Error(c.error.reason || String(c.error.error)), c.error));
      else c.resolve(c.result);
    }

    call(method, ...params) {
      const id = String(this.nextMethodId++);
      return new Promise((resolve, reject) => {
        this.methods.set(id, { resolve, reject, gotResult: false, gotUpdated: false });
        this.send({ msg: "method", method, params, id });
      });
    }

    subscribe(name, params) {
      const id = randomId();
      this.subs.set(id, { name, params, ready: false });
      this.send({ msg: "sub", id, name, params });
      return id;
    }

    unsubscribe(id) {
      this.subs.delete(id);
      this.send({ msg: "unsub", id });
    }
  }

  global.BolideDDP = { Connection, randomId, fromEJSON };
})(window);
