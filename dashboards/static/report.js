// Only in the static report: below the study page, the curves of the best trial(s), from the data embedded in the file.
"use strict";

(function bestTrialCurves() {
  if (!HPO.report) return;
  const h = HPO.h;
  const waitForStudy = setInterval(async () => {
    if (!document.body.dataset.allPlots) return; // the study page's plots first, then these curves below them
    clearInterval(waitForStudy);
    const app = document.getElementById("app");
    for (const id of HPO.report.runs || []) {
      const data = await HPO.api("/api/run", { id });
      const curves = h("div", { className: "grid3" });
      app.appendChild(HPO.card("Curves of " + HPO.runTitle(data), [runChips(data), curves], { wide: true }));
      const series = sortMetricNames(Object.keys(data.metrics)).map((name) => [name, data.metrics[name]]);
      if (data.trial && data.trial.intermediate.length) series.unshift(["reported to Optuna", { step: data.trial.intermediate.map((p) => p[0]), value: data.trial.intermediate.map((p) => p[1]) }]);
      for (const [name, metric] of series) {
        const div = h("div", { className: "plot small" });
        curves.appendChild(HPO.card(name, div));
        await HPO.plots.curves(div, [{ name, x: metric.step, y: metric.value }], name);
      }
      if (!series.length) curves.appendChild(h("p", { className: "muted" }, "no metrics recorded"));
    }
    document.body.dataset.reportDone = "1";
  }, 50);
})();
