// bolide-probe: what a Node.js server does inside, each second, for bolide to read beside its
// load. Loaded with no change to the server:
//
//   BOLIDE_PROBE=127.0.0.1:9465 NODE_OPTIONS="--require /path/to/bolide-probe" node main.js
//   bolide run tasks-reactive --target http://127.0.0.1:3000 --probe app=127.0.0.1:9465
//
// It serves the Prometheus text format at http://BOLIDE_PROBE/metrics, on a loopback address only
// (another address is refused: what a server does inside is for the machine running the test).
// Without BOLIDE_PROBE it does nothing. Costs: one timer a second (unref'd), Node's own event-loop
// delay histogram and GC observer, and the work of a read when bolide reads.
//
// Node: event-loop delay over the last whole second (p50, p99, max), event-loop utilisation
// (active time, a counter), GC pauses by kind (a histogram), heap, external and array-buffer
// memory, RSS, CPU time, active handles. Meteor, when the process runs it (found through its
// global `Package`): DDP sessions (now and created), subscriptions by publication (now and
// started), methods by name (calls, in flight, duration), observers (minimongo's live queries
// per collection, MongoDB's observe multiplexers and handles), DDP messages queued in sessions,
// and Meteor's own server facts.
"use strict";

const http = require("node:http");
const { monitorEventLoopDelay, performance, PerformanceObserver, constants } = require("node:perf_hooks");

const WANTED = process.env.BOLIDE_PROBE;
const WRAPPED = Symbol.for("bolide-probe.wrapped");
const GC_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
const METHOD_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

function loopback(host) {
  return host === "localhost" || host === "::1" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

function parseAddr(text) {
  const m = /^(.*):(\d+)$/.exec(text.trim());
  if (!m) return null;
  return { host: m[1].replace(/^\[|\]$/g, ""), port: Number(m[2]) };
}

function escape(v) {
  return String(v).replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function labels(obj) {
  const keys = Object.keys(obj || {});
  if (!keys.length) return "";
  return "{" + keys.map((k) => `${k}="${escape(obj[k])}"`).join(",") + "}";
}

/// A cumulative histogram in the text format.
class Histo {
  constructor(bounds) {
    this.bounds = bounds;
    this.counts = new Array(bounds.length).fill(0);
    this.count = 0;
    this.sum = 0;
  }
  observe(v) {
    for (let i = 0; i < this.bounds.length; i++) if (v <= this.bounds[i]) this.counts[i]++;
    this.count++;
    this.sum += v;
  }
  lines(name, lab) {
    const out = [];
    this.bounds.forEach((b, i) => out.push(`${name}_bucket${labels({ ...lab, le: b })} ${this.counts[i]}`));
    out.push(`${name}_bucket${labels({ ...lab, le: "+Inf" })} ${this.count}`);
    out.push(`${name}_sum${labels(lab)} ${this.sum}`);
    out.push(`${name}_count${labels(lab)} ${this.count}`);
    return out;
  }
}

// The event-loop sampling period, ms: 20 unless BOLIDE_PROBE_RESOLUTION says otherwise (10-1000).
function resolution(text) {
  if (text === undefined || text === "") return 20;
  const ms = Number(text);
  if (Number.isInteger(ms) && ms >= 10 && ms <= 1000) return ms;
  process.stderr.write(`bolide-probe: BOLIDE_PROBE_RESOLUTION=${text} is not a whole number of ms from 10 to 1000; 20 is used\n`);
  return 20;
}

function start(addr) {
  // The event loop's delay, each whole second.
  // Node samples the delay with a timer of RESOLUTION ms and counts the timer's own period in each
  // sample: it is taken off. Each sample wakes the process: BOLIDE_PROBE_RESOLUTION (ms, 10 to
  // 1000) trades the per-second percentiles' samples for the probe's own CPU.
  const RESOLUTION = resolution(process.env.BOLIDE_PROBE_RESOLUTION);
  const delay = monitorEventLoopDelay({ resolution: RESOLUTION });
  delay.enable();
  let lastSecond = { p50: 0, p99: 0, max: 0 };
  let elu = performance.eventLoopUtilization();
  let activeSeconds = 0;
  const tick = setInterval(() => {
    const ns = (v) => (Number.isFinite(v) ? Math.max(0, v - RESOLUTION * 1e6) / 1e9 : 0);
    lastSecond = { p50: ns(delay.percentile(50)), p99: ns(delay.percentile(99)), max: ns(delay.max) };
    delay.reset();
    const now = performance.eventLoopUtilization();
    activeSeconds += performance.eventLoopUtilization(now, elu).active / 1000;
    elu = now;
  }, 1000);
  tick.unref();

  // GC pauses by kind.
  const gcKinds = {
    [constants.NODE_PERFORMANCE_GC_MINOR]: "minor",
    [constants.NODE_PERFORMANCE_GC_MAJOR]: "major",
    [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: "incremental",
    [constants.NODE_PERFORMANCE_GC_WEAKCB]: "weakcb",
  };
  const gc = {};
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const kind = gcKinds[(e.detail && e.detail.kind) ?? e.kind] || "other";
        (gc[kind] ||= new Histo(GC_BUCKETS)).observe(e.duration / 1000);
      }
    }).observe({ entryTypes: ["gc"] });
  } catch (_) {
    // No GC entries on this Node: the series are left out.
  }

  const meteor = meteorWatch();

  function metrics() {
    const out = [];
    const gauge = (name, help, v, lab) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, `${name}${labels(lab)} ${v}`);
    };
    const counter = (name, help, v) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`, `${name} ${v}`);
    };
    gauge("probe_eventloop_delay_p50_seconds", "Event-loop delay over the last whole second, median.", lastSecond.p50);
    gauge("probe_eventloop_delay_p99_seconds", "Event-loop delay over the last whole second, p99.", lastSecond.p99);
    gauge("probe_eventloop_delay_max_seconds", "Event-loop delay over the last whole second, max.", lastSecond.max);
    const partial = performance.eventLoopUtilization(performance.eventLoopUtilization(), elu).active / 1000;
    counter("probe_eventloop_active_seconds_total", "Time the event loop was busy (its rate is the utilisation).", activeSeconds + partial);
    out.push("# HELP probe_gc_pause_seconds GC pauses by kind.", "# TYPE probe_gc_pause_seconds histogram");
    for (const [kind, h] of Object.entries(gc)) out.push(...h.lines("probe_gc_pause_seconds", { kind }));
    const mem = process.memoryUsage();
    gauge("probe_heap_used_bytes", "V8 heap used.", mem.heapUsed);
    gauge("probe_heap_total_bytes", "V8 heap allocated.", mem.heapTotal);
    gauge("probe_external_bytes", "Memory of C++ objects bound to JavaScript.", mem.external);
    gauge("probe_array_buffers_bytes", "Memory of ArrayBuffers and Buffers.", mem.arrayBuffers);
    gauge("probe_rss_bytes", "Resident set size.", mem.rss);
    const cpu = process.cpuUsage();
    counter("probe_cpu_seconds_total", "CPU time of the process, user and system.", (cpu.user + cpu.system) / 1e6);
    const handles = typeof process.getActiveResourcesInfo === "function" ? process.getActiveResourcesInfo().length : 0;
    gauge("probe_active_resources", "Active handles and requests keeping the event loop alive.", handles);
    meteor.lines(out);
    return out.join("\n") + "\n";
  }

  const server = http.createServer((req, res) => {
    if (req.method === "GET" && req.url.split("?")[0] === "/metrics") {
      let body;
      try {
        body = metrics();
      } catch (e) {
        res.statusCode = 500;
        res.end(`bolide-probe: ${e && e.message}\n`);
        return;
      }
      res.setHeader("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
      res.end(body);
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  server.on("error", (e) => process.stderr.write(`bolide-probe: cannot listen on ${addr.host}:${addr.port}: ${e.message}\n`));
  server.listen(addr.port, addr.host, () => {
    server.unref();
    const a = server.address();
    process.stderr.write(`bolide-probe: serving http://${a.family === "IPv6" ? `[${a.address}]` : a.address}:${a.port}/metrics\n`);
  });
}

/// Meteor's server, found when it is there (read at each scrape: the app may load after the probe).
function meteorWatch() {
  const created = { sessions: 0 };
  const started = {};
  const methods = {};
  const observersStarted = {};
  let hooked = false;

  function wrapHandlers(handlers, onCall) {
    for (const name of Object.keys(handlers)) {
      const f = handlers[name];
      if (typeof f !== "function" || f[WRAPPED]) continue;
      const wrapped = function (...args) {
        return onCall(name, () => f.apply(this, args));
      };
      wrapped[WRAPPED] = true;
      handlers[name] = wrapped;
    }
  }

  function attach(Meteor, P) {
    const server = Meteor.server;
    if (!server) return;
    // Observers started on in-memory collections (each publication's cursor observes once).
    const Cursor = P.minimongo && P.minimongo.LocalCollection && P.minimongo.LocalCollection.Cursor;
    const proto = Cursor && Cursor.prototype;
    if (proto && typeof proto.observeChanges === "function" && !proto.observeChanges[WRAPPED]) {
      const original = proto.observeChanges;
      const wrapped = function (...args) {
        const name = (this.collection && this.collection.name) || "(unnamed)";
        observersStarted[name] = (observersStarted[name] || 0) + 1;
        return original.apply(this, args);
      };
      wrapped[WRAPPED] = true;
      proto.observeChanges = wrapped;
    }
    if (!hooked && typeof Meteor.onConnection === "function") {
      Meteor.onConnection(() => {
        created.sessions++;
      });
      hooked = true;
    }
    wrapHandlers(server.publish_handlers || {}, (name, call) => {
      started[name] = (started[name] || 0) + 1;
      return call();
    });
    wrapHandlers(server.method_handlers || {}, (name, call) => {
      const m = (methods[name] ||= { calls: 0, errors: 0, inflight: 0, h: new Histo(METHOD_BUCKETS) });
      m.calls++;
      m.inflight++;
      const t0 = performance.now();
      const done = (failed) => {
        m.inflight--;
        if (failed) m.errors++;
        m.h.observe((performance.now() - t0) / 1000);
      };
      let result;
      try {
        result = call();
      } catch (e) {
        done(true);
        throw e;
      }
      if (result && typeof result.then === "function") {
        return result.then(
          (v) => {
            done(false);
            return v;
          },
          (e) => {
            done(true);
            throw e;
          },
        );
      }
      done(false);
      return result;
    });
  }

  function lines(out) {
    const P = globalThis.Package;
    const Meteor = P && P.meteor && P.meteor.Meteor;
    if (!Meteor || !Meteor.server) return;
    attach(Meteor, P);
    const server = Meteor.server;
    const sessions = server.sessions instanceof Map ? [...server.sessions.values()] : Object.values(server.sessions || {});
    const subs = {};
    let universal = 0;
    let queued = 0;
    let busy = 0;
    for (const s of sessions) {
      const named = s._namedSubs instanceof Map ? [...s._namedSubs.values()] : Object.values(s._namedSubs || {});
      for (const sub of named) subs[sub._name] = (subs[sub._name] || 0) + 1;
      universal += (s._universalSubs || []).length;
      queued += (s.inQueue && (s.inQueue.length ?? (typeof s.inQueue.size === "function" ? s.inQueue.size() : 0))) || 0;
      if (s.workerRunning) busy++;
    }
    const g = (name, help, rows) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
      for (const [lab, v] of rows) out.push(`${name}${labels(lab)} ${v}`);
    };
    const c = (name, help, rows) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
      for (const [lab, v] of rows) out.push(`${name}${labels(lab)} ${v}`);
    };
    g("probe_meteor_sessions", "DDP sessions open.", [[{}, sessions.length]]);
    c("probe_meteor_sessions_created_total", "DDP sessions opened since the probe found Meteor.", [[{}, created.sessions]]);
    g("probe_meteor_subscriptions", "Live subscriptions by publication.", Object.entries(subs).map(([n, v]) => [{ name: n }, v]));
    g("probe_meteor_universal_subscriptions", "Live universal (unnamed) subscriptions.", [[{}, universal]]);
    c("probe_meteor_subscriptions_started_total", "Subscriptions started by publication since the probe found Meteor.",
      Object.entries(started).map(([n, v]) => [{ name: n }, v]));
    g("probe_meteor_queued_messages", "DDP messages waiting in sessions' queues.", [[{}, queued]]);
    g("probe_meteor_busy_sessions", "Sessions running a message now.", [[{}, busy]]);
    c("probe_meteor_method_calls_total", "Method calls by name since the probe found Meteor.",
      Object.entries(methods).map(([n, m]) => [{ name: n }, m.calls]));
    c("probe_meteor_method_errors_total", "Method calls that threw, by name.", Object.entries(methods).map(([n, m]) => [{ name: n }, m.errors]));
    g("probe_meteor_methods_in_flight", "Method calls running now, by name.", Object.entries(methods).map(([n, m]) => [{ name: n }, m.inflight]));
    out.push("# HELP probe_meteor_method_seconds Method run time by name, from its call to its result.", "# TYPE probe_meteor_method_seconds histogram");
    for (const [n, m] of Object.entries(methods)) out.push(...m.h.lines("probe_meteor_method_seconds", { name: n }));
    // Observers of in-memory collections (no MongoDB): minimongo's live queries per collection.
    const all = P.mongo && P.mongo.Mongo && P.mongo.Mongo._collections;
    if (all instanceof Map) {
      const rows = [];
      for (const [n, coll] of all) {
        const queries = coll && coll._collection && coll._collection.queries;
        if (queries) rows.push([{ collection: n }, Object.keys(queries).length]);
      }
      g("probe_meteor_observers", "Live queries (observers) of in-memory collections, by collection.", rows);
    }
    c("probe_meteor_observers_started_total", "Observers started on in-memory collections since the probe found Meteor, by collection.",
      Object.entries(observersStarted).map(([n, v]) => [{ collection: n }, v]));
    // MongoDB-backed collections: the observe multiplexers (one per distinct cursor) and their handles.
    try {
      const internals = P.mongo && P.mongo.MongoInternals;
      const mongo = internals && internals.defaultRemoteCollectionDriver && internals.defaultRemoteCollectionDriver().mongo;
      const plexers = (mongo && mongo._observeMultiplexers) || null;
      if (plexers) {
        const list = Object.values(plexers);
        const handles = list.reduce((n, m) => n + Object.keys(m._handles || {}).length, 0);
        g("probe_meteor_observe_multiplexers", "MongoDB observe multiplexers (observers created).", [[{}, list.length]]);
        g("probe_meteor_observe_handles", "Observe handles on them (observers asked for; handles minus multiplexers were reused).", [[{}, handles]]);
      }
    } catch (_) {
      // No MongoDB driver in this process.
    }
    const facts = P["facts-base"] && P["facts-base"].Facts && P["facts-base"].Facts._factsByPackage;
    if (facts) {
      const rows = [];
      for (const [pkg, fs] of Object.entries(facts)) for (const [fact, v] of Object.entries(fs)) rows.push([{ package: pkg, fact }, v]);
      g("probe_meteor_facts", "Meteor's server facts (Facts.incrementServerFact), by package and fact.", rows);
    }
  }

  return { lines };
}

if (WANTED) {
  const addr = parseAddr(WANTED);
  if (!addr || !(addr.port >= 0 && addr.port < 65536)) {
    process.stderr.write(`bolide-probe: BOLIDE_PROBE=${WANTED} is not HOST:PORT (e.g. 127.0.0.1:9465); not started\n`);
  } else if (!loopback(addr.host)) {
    process.stderr.write(`bolide-probe: BOLIDE_PROBE=${WANTED} is not a loopback address; not started (it serves this machine only)\n`);
  } else {
    start(addr);
  }
}
