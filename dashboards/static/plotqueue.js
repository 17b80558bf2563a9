// Draws a page's plots in the order the user sees them: those on screen (or about to be) first, then the others, one
// per task, so a 10,000-trial page stays scrollable while they draw. A redraw (new trials, another objective) marks
// plots stale; they are drawn again the same way.
"use strict";

HPO.nextTask = function nextTask() {
  return new Promise((resolve) => setTimeout(resolve, 0));
};

// Resolves after the browser has painted the current DOM (the frame after the next animation frame).
HPO.afterPaint = function afterPaint() {
  return new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(() => resolve())));
};

HPO.PlotQueue = class PlotQueue {
  // divs: {key: element} in page order; jobs: {key: () => Promise} drawing that element
  constructor(divs, jobs) {
    this.divs = divs;
    this.jobs = jobs;
    this.stale = new Set();
    this.near = new Set();
    this.running = null;
    // 300px ahead: a plot starts drawing just before it scrolls into view.
    this.observer = new IntersectionObserver((entries) => this.seen(entries), { rootMargin: "300px 0px" });
    for (const [key, div] of Object.entries(divs)) {
      div.dataset.plotKey = key;
      this.observer.observe(div);
    }
  }

  seen(entries) {
    for (const entry of entries) {
      const key = entry.target.dataset.plotKey;
      if (entry.isIntersecting) this.near.add(key);
      else this.near.delete(key);
    }
  }

  // Marks plots stale (every plot when no keys are given); resolves once no plot is stale any more.
  draw(keys) {
    for (const key of keys || Object.keys(this.divs)) this.stale.add(key);
    if (!this.stale.size) return this.running || Promise.resolve();
    if (!this.running) this.running = this.run();
    return this.running;
  }

  nextKey() {
    const stale = Object.keys(this.divs).filter((key) => this.stale.has(key));
    return stale.find((key) => this.near.has(key)) || stale[0];
  }

  async run() {
    try {
      await HPO.afterPaint(); // the observer has reported which plots are on screen
      while (this.stale.size) {
        const key = this.nextKey();
        this.stale.delete(key);
        try {
          await this.jobs[key]();
        } catch (error) {
          HPO.showError(error); // one plot that cannot draw must not stop the others
        }
        performance.mark("hpo-" + key);
        await HPO.nextTask(); // let the browser handle input and scrolling between plots
      }
    } finally {
      this.running = null;
    }
  }
};
