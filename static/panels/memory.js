// Memory profile: per allocator, the summary, the timeline (in use: stack,
// heap, free; fragmentation on the right axis; hover for the values at a
// time) and the allocations live at the peak (the `memory` view model).
import {Lines} from '../charts.js';
import {bytes, esc, int, num, pct} from '../format.js';
import {Table} from '../table.js';
import {stat} from './common.js';

export default {
  id: 'memory',
  title: 'Memory profile',
  topics: ['memory'],
  csv: 'memory',

  mount(root, ctx) {
    root.innerHTML = `
      <section class="card"><h3>Memory <select class="allocator" aria-label="memory"></select>
        <button class="csv" title="every allocator's summary">Export CSV</button></h3><div class="summary"></div></section>
      <section class="card"><h3>Memory timeline <span class="muted">(hover for the values at a time; click a legend entry to hide a line)</span></h3>
        <div class="chart timeline"></div></section>
      <section class="card"><h3>Memory breakdown at the peak</h3>
        <p class="muted peak-note"></p><div class="breakdown"></div></section>`;
    const select = root.querySelector('.allocator');
    const summary = root.querySelector('.summary');
    const peakNote = root.querySelector('.peak-note');
    const timeline = new Lines(root.querySelector('.timeline'), {
      xLabel: 'seconds before now',
      series: [
        {label: 'In use', color: '#9467bd', fmt: bytes},
        {label: 'Stack', color: '#1f77b4', fmt: bytes},
        {label: 'Heap', color: '#ff7f0e', fmt: bytes},
        {label: 'Free', color: '#2ca02c', fmt: bytes},
        {label: 'Fragmentation', color: '#d62728', scale: 'right', fmt: (v) => pct(v, 1)},
      ],
      left: {label: 'bytes', values: (u, vals) => vals.map((v) => bytes(v))},
      right: {label: 'fragmentation %', range: [0, 100], values: (u, vals) => vals.map((v) => `${v}%`)},
    });
    const breakdown = new Table(root.querySelector('.breakdown'), [
      {key: 'bytes', label: 'Allocation size', numeric: true, fmt: bytes},
      {key: 'occurrences', label: 'Occurrences', numeric: true},
      {key: 'total_bytes', label: 'Total', numeric: true, fmt: bytes},
      {key: 'unattributed', label: 'Attributed', fmt: (v) => (v ? 'no (allocated before the window)' : 'yes')},
    ], {sort: {key: 'total_bytes', desc: true}});
    root.querySelector('.csv').addEventListener('click', () => ctx.exportCsv('memory'));
    select.addEventListener('change', () => last && draw(last));
    let last = null;

    function draw(m) {
      const ids = m.memories.map((x) => x.id);
      if (select.options.length !== ids.length || [...select.options].some((o, i) => o.value !== ids[i])) {
        const keep = select.value;
        select.innerHTML = ids.map((id) => `<option value="${esc(id)}">${esc(id)}</option>`).join('');
        if (ids.includes(keep)) select.value = keep;
      }
      const x = m.memories.find((y) => y.id === select.value) ?? m.memories[0];
      if (!x) {
        summary.innerHTML = '<p class="muted">No allocation seen yet.</p>';
        return;
      }
      summary.innerHTML = `<div class="stats">${stat('Peak heap usage (lifetime)', bytes(x.lifetime_peak_heap_bytes), 'lifetime_peak_heap_bytes')}` +
        stat('Peak in window', x.has_peak ? bytes(x.peak_bytes) : '—') + stat('Capacity', bytes(x.capacity_bytes)) +
        stat('In use now', bytes(x.stack_bytes + x.heap_bytes)) + stat('Free now', bytes(x.free_bytes)) +
        stat('Fragmentation now', pct(x.fragmentation_pct)) + stat('Peak fragmentation', pct(x.peak_fragmentation_pct)) +
        stat('Allocations', int(x.num_allocations), 'num_allocations') + stat('Deallocations', int(x.num_deallocations)) +
        stat('Live allocations', int(x.live_allocations)) + '</div>' +
        (x.live_map_incomplete ? '<p class="note">Some allocations were made before liveprof saw them: live sizes are a lower bound.</p>' : '');
      const t = x.timeline;
      // x: seconds before the view's time, so the axis does not slide.
      timeline.setData([t.ts_ns.map((v) => (v - m.now_ns) / 1e9), t.stack_bytes.map((b, i) => b + t.heap_bytes[i]),
        t.stack_bytes, t.heap_bytes, t.free_bytes, t.fragmentation_pct]);
      peakNote.textContent = x.breakdown_at_peak
        ? `${x.breakdown.length} allocation sizes live at the peak (${bytes(x.peak_bytes)})`
        : 'no breakdown at the peak in this window (the peak came before the window, or no allocation was seen)';
      breakdown.setRows(x.breakdown_at_peak ? x.breakdown : []);
    }

    return {
      render({memory: m}) {
        if (!m) return;
        last = m;
        draw(m);
      },
    };
  },
};
