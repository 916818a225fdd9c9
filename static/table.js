// A sortable, filterable table. The rows are plain objects from a view model;
// columns say how to show each field. Re-rendering keeps the sort, the filter
// and the scroll position, so a table can be refreshed on every publication.
import {esc, shortName} from './format.js';  // the header's HTML

// columns: [{key, label, fmt(value, row) -> text, numeric, name (a long name: wraps), short (a C++
//   name: shown short by format.js's shortName, whole on hover), title, hidden (until showColumn),
//   href(row) (the text is a link there), cellTitle(value, row) -> a cell's own hover text}]
// options: {filterKeys: ['name', ...] (a filter box over these fields),
//           sort: {key, desc}, rowLimit, onRowClick(row), rowKey(row)}
export class Table {
  constructor(root, columns, options = {}) {
    this.columns = columns;
    this.options = options;
    this.rows = [];
    this.sort = options.sort ?? {key: columns[0].key, desc: false};
    this.filter = '';
    this.selected = null;
    root.classList.add('table-block');
    root.innerHTML = `
      ${options.filterKeys ? `<input type="search" class="filter" placeholder="Filter by ${esc(options.filterLabel ?? 'name')}…" aria-label="filter">` : ''}
      <span class="table-count"></span>
      <div class="table-scroll"><table><thead><tr>${columns
        .map((c) => `<th data-key="${esc(c.key)}" class="${c.numeric ? 'num' : ''}" title="${esc(c.title ?? '')}"${c.hidden ? ' hidden' : ''}>${esc(c.label)}</th>`)
        .join('')}</tr></thead><tbody></tbody></table></div>`;
    this.count = root.querySelector('.table-count');
    this.body = root.querySelector('tbody');
    this.head = root.querySelector('thead');
    this.head.addEventListener('click', (e) => {
      const th = e.target.closest('th');
      if (!th) return;
      const key = th.dataset.key;
      const column = this.columns.find((c) => c.key === key);
      this.sort = {key, desc: this.sort.key === key ? !this.sort.desc : !!column.numeric};
      this.render();
    });
    const input = root.querySelector('.filter');
    if (input) {
      input.addEventListener('input', () => {
        this.filter = input.value.trim().toLowerCase();
        this.render();
      });
    }
    if (options.onRowClick) {
      this.body.addEventListener('click', (e) => {
        const tr = e.target.closest('tr');
        if (!tr || tr.dataset.i === undefined) return;
        const row = this.visible[+tr.dataset.i];
        this.selected = options.rowKey ? options.rowKey(row) : null;
        options.onRowClick(row);
        this.render();
      });
    }
  }

  setRows(rows) {
    this.rows = rows ?? [];
    this.render();
  }

  // Shows or hides column `key` (one that only some data fills).
  showColumn(key, shown) {
    const c = this.columns.findIndex((x) => x.key === key);
    if (c < 0 || !this.columns[c].hidden === shown) return;
    this.columns[c].hidden = !shown;
    this.head.rows[0].cells[c].hidden = !shown;
    for (const tr of this.body.rows) tr.cells[c].hidden = !shown;
  }

  // The rows as shown: filtered, sorted.
  shownRows() {
    const keys = this.options.filterKeys;
    let rows = this.rows;
    if (this.filter && keys) {
      rows = rows.filter((r) => keys.some((k) => String(r[k] ?? '').toLowerCase().includes(this.filter)));
    }
    const {key, desc} = this.sort;
    const dir = desc ? -1 : 1;
    return rows.slice().sort((a, b) => {
      const x = a[key];
      const y = b[key];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y))) * dir;
    });
  }

  render() {
    const rows = this.shownRows();
    // A long table shows its first rows until asked for all (a few thousand
    // rows redrawn at 5 Hz would take the page's main thread).
    const limit = this.showAll ? Infinity : this.options.rowLimit ?? 500;
    this.visible = rows.slice(0, limit);
    for (const th of this.head.querySelectorAll('th')) {
      th.setAttribute('aria-sort', th.dataset.key === this.sort.key ? (this.sort.desc ? 'descending' : 'ascending') : 'none');
    }
    this.fill(this.visible);
    const total = this.rows.length;
    const capped = rows.length > limit;
    const count = capped
      ? `showing ${limit} of ${rows.length} rows`
      : `${rows.length}${rows.length !== total ? ` of ${total}` : ''} rows`;
    if (this.count.firstChild?.data !== count) {
      this.count.textContent = count;
      if (capped && this.options.rowLimit === undefined) {
        const all = document.createElement('button');
        all.textContent = 'show all';
        all.addEventListener('click', () => {
          this.showAll = true;
          this.render();
        });
        this.count.append(' ', all);
      }
    }
  }

  // Puts `rows` into the body, touching only the cells whose text changed:
  // a live table is redrawn ten times a second, and rebuilding its DOM each
  // time would cost more than everything else on the page.
  fill(rows) {
    const body = this.body;
    const columns = this.columns;
    while (body.rows.length < rows.length) {
      const tr = body.insertRow();
      tr.dataset.i = String(body.rows.length - 1);
      tr.texts = columns.map(() => '');
      for (const c of columns) {
        const td = tr.insertCell();
        td.className = c.numeric ? 'num' : c.name ? 'name' : '';
        td.hidden = !!c.hidden;
        const text = document.createTextNode('');
        if (c.href) {
          const a = document.createElement('a');
          a.append(text);
          td.append(a);
        } else {
          td.append(text);
        }
      }
    }
    while (body.rows.length > rows.length) body.deleteRow(-1);
    const rowKey = this.options.rowKey;
    rows.forEach((r, i) => {
      const tr = body.rows[i];
      for (let c = 0; c < columns.length; c++) {
        const col = columns[c];
        const text = String((col.fmt ? col.fmt(r[col.key], r) : r[col.key]) ?? '');
        if (tr.texts[c] !== text) {
          tr.texts[c] = text;
          // A long C++ name (`short` columns) shows short; the whole on hover.
          const shown = col.short ? shortName(text) : text;
          (col.href ? tr.cells[c].firstChild.firstChild : tr.cells[c].firstChild).data = shown;
          if (col.short) tr.cells[c].title = shown === text ? '' : text;
        }
        if (col.cellTitle) {
          const title = col.cellTitle(r[col.key], r) ?? '';
          if (tr.cells[c].title !== title) tr.cells[c].title = title;
        }
        if (col.href) {
          const href = col.href(r);
          const a = tr.cells[c].firstChild;
          if (a.getAttribute('href') !== href) a.setAttribute('href', href);
        }
      }
      if (rowKey) tr.classList.toggle('selected', rowKey(r) === this.selected);
    });
  }
}
