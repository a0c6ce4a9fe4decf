// A table that sorts by any column (click its heading; again to reverse) and filters rows.
// Every cell carries its raw value in data-value (numbers as given in report.json), its text
// is what a person reads. Long tables show `limit` rows and a button for the rest.
import {el} from './dom.js';

export class SortableTable {
  // columns: [{key, title, value(row), text(row), numeric, title_of(row)?}]
  // detail(row): an element shown under the row when its toggle is clicked, for the rows
  // hasDetail(row) says have one.
  constructor({id, columns, rows, sort, limit = 200, detail = null, hasDetail = () => false,
               empty = 'no rows'}) {
    this.columns = columns;
    this.rows = rows;
    this.filter = () => true;
    this.limit = limit;
    this.showAll = false;
    this.detail = detail;
    this.hasDetail = hasDetail;
    this.open = new Set();
    this.empty = empty;
    this.sort = sort || {key: columns[0].key, dir: 'ascending'};
    this.head = el('tr', {}, columns.map((c) => this._th(c)));
    this.body = el('tbody');
    this.more = el('button', {type: 'button', class: 'pc-more', onclick: () => {
      this.showAll = true;
      this.render();
    }});
    this.table = el('table', {id, class: 'pc-table'}, [el('thead', {}, [this.head]), this.body]);
    this.element = el('div', {class: 'pc-table-box'}, [this.table, this.more]);
    this.render();
  }

  _th(c) {
    const th = el('th', {'data-col': c.key, class: c.numeric ? 'num' : '', scope: 'col',
                         tabindex: '0', title: `sort by ${c.title}`}, [c.title]);
    const go = () => {
      const dir = this.sort.key === c.key && this.sort.dir === 'descending' ? 'ascending' :
        this.sort.key === c.key ? 'descending' : (c.numeric ? 'descending' : 'ascending');
      this.sortBy(c.key, dir);
    };
    th.addEventListener('click', go);
    th.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
    return th;
  }

  sortBy(key, dir) {
    this.sort = {key, dir};
    this.render();
  }

  setFilter(fn) {
    this.filter = fn;
    this.render();
  }

  visibleRows() {
    const col = this.columns.find((c) => c.key === this.sort.key) || this.columns[0];
    const sign = this.sort.dir === 'descending' ? -1 : 1;
    const rows = this.rows.filter(this.filter);
    return rows.map((r, i) => [r, i]).sort(([a, i], [b, j]) => {
      const x = col.value(a);
      const y = col.value(b);
      const c = col.numeric ? (x ?? -Infinity) - (y ?? -Infinity) :
        String(x ?? '').localeCompare(String(y ?? ''));
      return c * sign || i - j;  // stable: ties keep report.json's order
    }).map(([r]) => r);
  }

  render() {
    for (const th of this.head.children) {
      th.setAttribute('aria-sort', th.dataset.col === this.sort.key ? this.sort.dir : 'none');
    }
    const rows = this.visibleRows();
    const shown = this.showAll ? rows : rows.slice(0, this.limit);
    const trs = [];
    for (const r of shown) {
      trs.push(this._tr(r));
      if (this.open.has(r) && this.detail) {
        trs.push(el('tr', {class: 'pc-detail'}, [
          el('td', {colspan: String(this.columns.length)}, [this.detail(r)])]));
      }
    }
    if (!rows.length) {
      trs.push(el('tr', {class: 'pc-empty'}, [
        el('td', {colspan: String(this.columns.length)}, [this.empty])]));
    }
    this.body.replaceChildren(...trs);
    this.more.hidden = shown.length === rows.length;
    this.more.textContent = `show all ${rows.length} rows`;
    this.table.dataset.rows = String(rows.length);
  }

  _tr(r) {
    const tds = this.columns.map((c) => {
      const v = c.value(r);
      const td = el('td', {'data-col': c.key, class: c.numeric ? 'num' : ''},
                    [c.text ? c.text(r) : String(v ?? '')]);
      td.dataset.value = v === null || v === undefined ? '' :
        typeof v === 'object' ? JSON.stringify(v) : String(v);
      if (c.titleOf) td.title = c.titleOf(r);
      return td;
    });
    const tr = el('tr', {'data-key': r.key ?? ''}, tds);
    if (this.detail && this.hasDetail(r)) {
      const button = el('button', {type: 'button', class: 'pc-toggle',
                                   'aria-expanded': String(this.open.has(r))},
                        [this.open.has(r) ? '▾' : '▸']);
      button.addEventListener('click', () => {
        if (this.open.has(r)) this.open.delete(r); else this.open.add(r);
        this.render();
      });
      tds[0].prepend(button);
    }
    return tr;
  }
}
