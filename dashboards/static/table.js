// A sortable, filterable, paginated table. Only the visible page is in the DOM, so 10,000 trials stay fast.
"use strict";

HPO.Table = class Table {
  // columns: [{key, label, value(row) -> sortable value, cell(row) -> Node|string, numeric}]
  constructor(container, options) {
    this.columns = options.columns;
    this.pageSize = options.pageSize || 100;
    this.stateFilter = Boolean(options.stateFilter);
    this.rows = [];
    this.sortKey = options.sortKey || null;
    this.sortDir = options.sortDir || 1;
    this.filter = "";
    this.state = "";
    this.page = 0;
    this.searchText = new WeakMap();
    this.build(container, options);
  }

  build(container, options) {
    const h = HPO.h;
    this.search = h("input", { type: "search", placeholder: options.placeholder || "filter rows (any column)", "aria-label": "filter" });
    this.search.addEventListener("input", () => { this.filter = this.search.value.toLowerCase(); this.page = 0; this.render(); });
    this.stateSelect = null;
    if (this.stateFilter) {
      this.stateSelect = h("select", { "aria-label": "state" }, h("option", { value: "" }, "all states"),
        HPO.STATES.map((state) => h("option", { value: state }, state.toLowerCase())));
      this.stateSelect.addEventListener("change", () => { this.state = this.stateSelect.value; this.page = 0; this.render(); });
    }
    this.prev = h("button", { type: "button" }, "‹ prev");
    this.next = h("button", { type: "button" }, "next ›");
    this.prev.addEventListener("click", () => { this.page -= 1; this.render(); });
    this.next.addEventListener("click", () => { this.page += 1; this.render(); });
    this.count = h("span", { className: "count" });
    this.head = h("tr");
    this.body = h("tbody");
    this.table = h("table", { className: "data-table" }, h("thead", {}, this.head), this.body);
    HPO.append(container, [h("div", { className: "table-tools" }, this.search, this.stateSelect, this.prev, this.next, this.count),
      h("div", { className: "scroll" }, this.table)]);
    this.renderHead();
  }

  setColumns(columns) {
    this.columns = columns;
    this.renderHead();
    this.render();
  }

  renderHead() {
    HPO.clear(this.head);
    for (const column of this.columns) {
      const th = HPO.h("th", { className: "sortable", title: "sort by " + column.label }, column.label);
      if (column.key === this.sortKey) th.classList.add(this.sortDir > 0 ? "sorted-asc" : "sorted-desc");
      th.addEventListener("click", () => {
        this.sortDir = this.sortKey === column.key ? -this.sortDir : 1;
        this.sortKey = column.key;
        this.renderHead();
        this.render();
      });
      this.head.appendChild(th);
    }
  }

  setRows(rows) {
    this.rows = rows;
    this.render();
  }

  textOf(row) {
    let text = this.searchText.get(row);
    if (text === undefined) {
      text = this.columns.filter((c) => c.searchable !== false).map((c) => HPO.fmt(c.value(row))).join(" ").toLowerCase();
      this.searchText.set(row, text);
    }
    return text;
  }

  visibleRows() {
    let rows = this.rows;
    if (this.state) rows = rows.filter((row) => row.state === this.state);
    if (this.filter) rows = rows.filter((row) => this.textOf(row).includes(this.filter));
    const column = this.columns.find((c) => c.key === this.sortKey);
    if (column) {
      const dir = this.sortDir;
      rows = rows.map((row) => [column.value(row), row]);
      rows.sort((a, b) => compareValues(a[0], b[0]) * dir);
      rows = rows.map((pair) => pair[1]);
    }
    return rows;
  }

  render() {
    const rows = this.visibleRows();
    const pages = Math.max(1, Math.ceil(rows.length / this.pageSize));
    this.page = Math.min(Math.max(this.page, 0), pages - 1);
    const first = this.page * this.pageSize;
    const shown = rows.slice(first, first + this.pageSize);
    const fragment = document.createDocumentFragment();
    for (const row of shown) {
      const tr = HPO.h("tr");
      for (const column of this.columns) {
        const content = column.cell ? column.cell(row) : HPO.fmt(column.value(row));
        const classes = [column.numeric ? "num" : "", column.nowrap ? "nowrap" : ""].join(" ").trim();
        tr.appendChild(HPO.h("td", { className: classes || null }, content));
      }
      fragment.appendChild(tr);
    }
    HPO.clear(this.body).appendChild(fragment);
    const filtered = rows.length !== this.rows.length ? " (filtered from " + this.rows.length + ")" : "";
    this.count.textContent = rows.length
      ? `rows ${first + 1}–${first + shown.length} of ${rows.length}${filtered}`
      : `no rows${filtered}`;
    this.table.dataset.total = String(this.rows.length);
    this.table.dataset.shown = String(rows.length);
    this.prev.disabled = this.page === 0;
    this.next.disabled = this.page >= pages - 1;
  }
};

function compareValues(a, b) {
  const aMissing = a === null || a === undefined || a === "";
  const bMissing = b === null || b === undefined || b === "";
  if (aMissing || bMissing) return aMissing === bMissing ? 0 : aMissing ? 1 : -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}
