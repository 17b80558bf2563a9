// The first script of every page: starts the study page's first API request at once, so the server answers while the
// browser is still parsing the page's other scripts (scripts run in order; this one is tiny).
"use strict";

window.HPO_PREFETCH = {};
(function prefetchStudy() {
  const name = new URLSearchParams(window.location.search).get("name");
  if (window.location.pathname !== "/study" || !name) return;
  const key = "/api/study?" + new URLSearchParams({ name }).toString();
  window.HPO_PREFETCH[key] = fetch(key, { headers: { Accept: "application/json" } }).then((response) =>
    response.json().then((body) => ({ ok: response.ok, status: response.statusText, body }))
  );
})();
