// bolide's live dashboard: receives a snapshot of the run's charts every second over Server-Sent
// Events (/events) and redraws them with report.js; when the run ends, shows the final report
// (/report). <body data-updates> counts the snapshots drawn, for the tests.
"use strict";
(function () {
  let updates = 0;
  const status = document.getElementById("live-status");
  const events = new EventSource("/events");
  events.addEventListener("snapshot", (e) => {
    updates += 1;
    window.bolideReport.render(JSON.parse(e.data));
    document.body.dataset.updates = String(updates);
    if (status) status.textContent = "live: updated " + new Date().toLocaleTimeString();
  });
  events.addEventListener("done", () => {
    events.close();
    if (status) status.textContent = "the run has ended: loading the final report";
    window.location.replace("/report");
  });
  events.onerror = () => {
    if (status) status.textContent = "disconnected: bolide has ended or cannot be reached";
  };
})();
