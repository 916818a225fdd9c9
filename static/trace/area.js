// The trace viewer's area selection (a box dragged in select mode), as
// Perfetto's: every event in it summed per name, the sub-pixel ones too.
// The store sums them (/api/trace/area: count, wall and self time, the
// longest); until it answers (or if it cannot: an older agent on a fleet
// view), the tile's slices in the box.
import {duration, esc, int} from '../format.js';

// box: {t0, t1, y0, y1}; layout: the rows' (the pinned rows' for a box drawn
// over them); o: {st (the viewer's state), source, el (the details), current
// () (false once a newer box was drawn)}. The query and its answer go to st.area.
export function sumArea(box, layout, o) {
  const {st, source, el} = o;
  const ta = Math.min(box.t0, box.t1), tb = Math.max(box.t0, box.t1);
  const ya = Math.min(box.y0, box.y1), yb = Math.max(box.y0, box.y1);
  const rows = layout.rows.filter((row) => row.kind === 'track' && row.y + row.h >= ya && row.y <= yb &&
    !['counter', 'memory'].includes(st.tracks.get(row.id)?.type));
  const by = new Map();
  for (const row of rows) {
    for (const s of st.tile?.tracks.get(row.id)?.slices ?? []) {
      if (s.ts > tb || s.ts + s.dur < ta) continue;
      const n = st.tile.names.get(s.name) ?? '';
      const a = by.get(n) ?? [n, 0, 0, null, 0];
      a[1]++;
      a[2] += s.dur;
      a[4] = Math.max(a[4], s.dur);
      by.set(n, a);
    }
  }
  const list = [...by.values()].sort((a, b) => b[2] - a[2]);
  const drawn = {events: list.reduce((a, v) => a + v[1], 0), names: list, tracks: rows.length};
  el.innerHTML = areaHtml(drawn, ta, tb, rows.length ? 'summing…' : null);
  if (!rows.length) return;
  const t0 = Math.max(0, Math.floor(ta)), t1 = Math.max(t0 + 1, Math.ceil(tb));
  const q = {t0, t1, tracks: rows.map((r) => r.id).join(',')};
  st.area = {query: q, answer: null};
  source.get('trace/area', q).then((a) => {
    if (!o.current()) return;
    st.area.answer = a;
    el.innerHTML = areaHtml(a, ta, tb, null);
  }, (err) => {
    if (o.current()) el.innerHTML = areaHtml(drawn, ta, tb, `the slices drawn only (the store's sums did not come: ${err.message})`);
  });
}

// a: /api/trace/area's answer (names: [name, count, total, self, longest]).
function areaHtml(a, ta, tb, note) {
  const more = a.names_total > a.names.length ? ` (the ${int(a.names.length)} longest of ${int(a.names_total)})` : '';
  return `<h4>${int(a.events)} events in ${duration(Math.round(tb - ta))}` +
    ` on ${int(a.tracks ?? 0)} row${a.tracks === 1 ? '' : 's'}${a.truncated ? ' (stopped there: too many to sum)' : ''}</h4>` +
    `${note ? `<p class="muted area-note">${esc(note)}</p>` : ''}` +
    `<table class="box-sum"><thead><tr><th>Name${more}</th><th class="num">Count</th><th class="num">Wall time</th>` +
    `<th class="num">Self time</th><th class="num">Average</th><th class="num">Longest</th></tr></thead><tbody>${
      a.names.slice(0, 200).map(([n, count, total, self, max]) =>
        `<tr><td class="name">${esc(n)}</td><td class="num">${int(count)}</td><td class="num">${duration(total)}</td>` +
        `<td class="num">${self === null ? '' : duration(self)}</td><td class="num">${duration(Math.round(total / count))}</td>` +
        `<td class="num">${duration(max)}</td></tr>`).join('')}</tbody></table>`;
}
