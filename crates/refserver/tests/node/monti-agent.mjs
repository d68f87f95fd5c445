// Sends what a Monti APM agent sends, with the agent's own client library (monti-apm-core, which
// the montiapm:agent Meteor package uses to talk to its engine) and its own histogram class
// (monti-apm-sketches-js): the auth ping, the clock sync, metric posts shaped as the agent's
// models build them (lib/models/{system,pubsub,methods}.js), and JSON-lines traces.
//
//   node monti-agent.mjs ENDPOINT APP_ID APP_SECRET BUSY_POSTS EVERY_MS
//   node monti-agent.mjs env BUSY_POSTS
//
// After connecting it waits a second, sends BUSY_POSTS posts with method and publication figures
// (the same in each), then posts the system figures alone every EVERY_MS until it is stopped or
// 60 s have passed, as an idle agent does. It prints one JSON line when connected
// ({"connected": true}) or refused ({"error": "..."}), and one with what the busy posts held.
import monti from 'monti-apm-core';
import sketches from 'monti-apm-sketches-js';

const { Kadira } = monti;
const { DDSketch } = sketches;
// `env BUSY_POSTS`: the endpoint, the app and the interval from the environment, as the agent
// reads them (MONTI_OPTIONS_ENDPOINT, MONTI_APP_ID, MONTI_APP_SECRET, MONTI_OPTIONS_PAYLOAD_TIMEOUT).
const args = process.argv.slice(2);
const fromEnv = args[0] === 'env';
const e = process.env;
const [endpoint, appId, appSecret, busyText, everyText] = fromEnv
  ? [e.MONTI_OPTIONS_ENDPOINT, e.MONTI_APP_ID, e.MONTI_APP_SECRET, args[1], e.MONTI_OPTIONS_PAYLOAD_TIMEOUT || '20000']
  : args;
const busy = Number(busyText);
const every = Number(everyText);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function sketch(values) {
  const s = new DDSketch({ alpha: 0.02 });
  values.forEach((v) => s.add(v));
  return s;
}

// One post's figures: what three insertTask calls, two removeTask calls and two fetchTasks
// subscriptions in ten seconds look like to the agent.
const METHODS = { insertTask: [4, 6, 40], removeTask: [3, 5] };
const PUB = [12, 30];

function busyPayload(now) {
  const methods = {};
  for (const [name, times] of Object.entries(METHODS)) {
    const total = times.reduce((a, b) => a + b, 0);
    methods[name] = {
      count: times.length, errors: name === 'removeTask' ? 1 : 0,
      wait: 0.5, db: 1.5, http: 0, email: 0, async: 0, compute: total / times.length - 2,
      total: total / times.length, fetchedDocSize: 100, sentMsgSize: 50, waitedOn: 0,
      histogram: sketch(times),
    };
  }
  return {
    methodMetrics: [{ startTime: now - 300, endTime: now, methods }],
    pubMetrics: [{
      startTime: now - 300,
      pubs: {
        fetchTasks: {
          subs: 2, unsubs: 1, resTime: 21, activeSubs: 4, activeDocs: 20, lifeTime: 0,
          totalObservers: 2, cachedObservers: 1, createdObservers: 1, deletedObservers: 1,
          errors: 0, observerLifetime: 0, polledDocuments: 0, oplogUpdatedDocuments: 0,
          oplogInsertedDocuments: 0, oplogDeletedDocuments: 0, initiallyAddedDocuments: 10,
          liveAddedDocuments: 3, liveChangedDocuments: 0, liveRemovedDocuments: 2, polledDocSize: 0,
          fetchedDocSize: 0, initiallyFetchedDocSize: 1000, liveFetchedDocSize: 300,
          initiallySentMsgSize: 1200, liveSentMsgSize: 400, waitedOn: 0, waitTime: 0,
          histogram: sketch(PUB),
        },
      },
    }],
  };
}

function systemPayload(now, sessions) {
  return {
    systemMetrics: [{
      startTime: now - every, endTime: now, sessions, newSessions: 0,
      memory: 150.1, memoryArrayBuffers: 0.5, memoryExternal: 2.1, memoryHeapUsed: 60.2, memoryHeapTotal: 80,
      freeMemory: 1000, totalMemory: 4000, activeRequests: 0, activeHandles: 12,
      evloopHistogram: sketch([1, 1, 2]), gcMajorDuration: 0, gcMinorDuration: 2.5,
      gcIncrementalDuration: 0, gcWeakCBDuration: 0, mongoPoolSize: 100, mongoPoolPrimaryCheckouts: 0,
      mongoPoolOtherCheckouts: 0, mongoPoolCheckoutTime: 0, mongoPoolMaxCheckoutTime: 0, mongoPoolPending: 0,
      mongoPoolCheckedOutConnections: 0, mongoPoolCreatedConnections: 0, pcpu: 12.5, pcpuUser: 10, pcpuSystem: 2.5,
      cpuHistory: [],
    }],
  };
}

const core = new Kadira({
  appId, appSecret, endpoint, hostname: 'bolide-test', agentVersion: 'test',
  retryOptions: { maxRetries: 3, authRetryDelay: 200 },
});
try {
  await core.connect();
} catch (e) {
  console.log(JSON.stringify({ error: e.message }));
  process.exit(0);
}
console.log(JSON.stringify({ connected: true }));
await sleep(1000);
for (let i = 0; i < busy; i++) {
  const now = core._clock.getTime();
  await core.sendData({ ...busyPayload(now), ...systemPayload(now, 4) });
  await core.sendTraces([{ type: 'method', name: 'insertTask', at: now }]);
  await sleep(every);
}
console.log(JSON.stringify({ busy, methods: METHODS, pub: PUB }));
const until = Date.now() + 60_000;
while (Date.now() < until) {
  try {
    await core.sendData(systemPayload(core._clock.getTime(), 0));
  } catch (e) {
    // bolide has gone: the run is over.
    process.exit(0);
  }
  await sleep(every);
}
