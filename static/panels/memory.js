// Memory profile: per allocator, the summary, the timeline (in use: stack,
// heap, free; fragmentation on the right axis; hover for the values at a
// time) and the allocations live at the peak by op (the `memory` view model).
// The y axis is scaled to the data (binary ticks: 128 MiB, 256 MiB, ...);
// the capacity is a dashed line when near the data, else a label above it.
import {BYTE_INCRS, Lines, byteAxisTop, byteTicks} from '../charts.js';
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
        <p class="muted capacity-marker" hidden></p><div class="chart timeline"></div></section>
      <section class="card"><h3>Memory breakdown at the peak <span class="muted">(live allocations by the op that made them)</span></h3>
        <p class="muted peak-note"></p><div class="breakdown"></div></section>`;
    const select = root.querySelector('.allocator');
    const summary = root.querySelector('.summary');
    const peakNote = root.querySelector('.peak-note');
    const capacityNote = root.querySelector('.capacity-marker');
    let top = 1024;  // the y axis's top, bytes.
    const chartEl = root.querySelector('.timeline');
    // The labels drawn (on the canvas) also go to data-ticks and the top to
    // data-y-max, for the tests and for reading them out.
    const yTicks = (u, vals) => {
      const labels = byteTicks(vals, top);
      chartEl.dataset.ticks = JSON.stringify(labels);
      chartEl.dataset.yMax = String(top);
      return labels;
    };
    // Heap and stack first, so that "In use" (their sum) is drawn over them.
    const timeline = new Lines(chartEl, {
      xLabel: 'seconds before now',
      series: [
        {label: 'Heap', color: '#ff7f0e', fmt: bytes},
        {label: 'Stack', color: '#1f77b4', fmt: bytes},
        {label: 'In use', color: '#9467bd', width: 2.5, fmt: bytes},
        {label: 'Free', color: '#2ca02c', fmt: bytes},
        {label: 'Fragmentation', color: '#d62728', scale: 'right', fmt: (v) => pct(v, 1)},
      ],
      left: {label: 'bytes', incrs: BYTE_INCRS, range: () => [0, top], values: yTicks},
      right: {label: 'fragmentation %', range: [0, 100], values: (u, vals) => vals.map((v) => `${v}%`)},
    });
    const breakdown = new Table(root.querySelector('.breakdown'), [
      {key: 'op', label: 'Op', fmt: (v) => v || 'unattributed (no enclosing op seen)'},
      {key: 'bytes', label: 'Allocation size', numeric: true, fmt: bytes},
      {key: 'requested_bytes', label: 'Requested size', numeric: true, fmt: (v) => (v ? bytes(v) : '—'), hidden: true},
      {key: 'occurrences', label: 'Occurrences', numeric: true},
      {key: 'total_bytes', label: 'Total', numeric: true, fmt: bytes},
      {key: 'region', label: 'Region type', hidden: true},
      {key: 'data_type', label: 'Data type', hidden: true},
      {key: 'shape', label: 'Shape', hidden: true},
    ], {sort: {key: 'total_bytes', desc: true}});
    // Columns only a framework's own annotations fill (TensorFlow's XPlane).
    const ANNOTATIONS = ['requested_bytes', 'region', 'data_type', 'shape'];
    root.querySelector('.csv').addEventListener('click', () => ctx.exportCsv('memory'));
    select.addEventListener('change', () => last && draw(last));
    let last = null;
    let hostOnly = false;  // the job has no device (status.has_device).
    // What the page has not got for a job with no device, and where to look.
    const NO_DEVICE = 'No device memory: this job has no device (no GPU was seen). This page shows the memory of ' +
      'device allocators: the CUDA caching allocator\'s under liveprof run, a framework\'s allocator events (TensorFlow, ' +
      'PyTorch\'s memory profiler in a replayed trace), LIVEPROF_ALLOC/LIVEPROF_FREE in C++. A CPU process\'s own ' +
      'memory (its resident set, RSS) is on the Sources page, each process\'s, read once a second ' +
      '(Process memory); a timeline of it here is not recorded yet.';

    function draw(m) {
      const ids = m.memories.map((x) => x.id);
      if (select.options.length !== ids.length || [...select.options].some((o, i) => o.value !== ids[i])) {
        const keep = select.value;
        select.innerHTML = ids.map((id) => `<option value="${esc(id)}">${esc(id)}</option>`).join('');
        if (ids.includes(keep)) select.value = keep;
      }
      const x = m.memories.find((y) => y.id === select.value) ?? m.memories[0];
      select.hidden = !x;
      for (const el of root.querySelectorAll(':scope > section:not(:first-child)')) el.hidden = !x && hostOnly;
      if (!x) {
        summary.innerHTML = hostOnly ? `<p class="empty-why" data-field="no_device">${esc(NO_DEVICE)}</p>`
          : '<p class="muted">No allocation seen yet.</p>';
        return;
      }
      summary.innerHTML = `<div class="stats">${stat('Peak heap usage (lifetime)', bytes(x.lifetime_peak_heap_bytes), 'lifetime_peak_heap_bytes')}` +
        stat('Peak in window', x.has_peak ? bytes(x.peak_bytes) : '—') +
        stat('Capacity', x.capacity_bytes > 0 ? bytes(x.capacity_bytes) : 'not said') +
        stat('In use now', bytes(x.stack_bytes + x.heap_bytes)) +
        // Free is capacity (or reserved) less in use: unknown without either.
        stat('Free now', x.capacity_bytes > 0 || x.reserved_bytes != null ? bytes(x.free_bytes) : 'not said') +
        stat('Fragmentation now', pct(x.fragmentation_pct)) + stat('Peak fragmentation', pct(x.peak_fragmentation_pct)) +
        stat('Allocations', int(x.num_allocations), 'num_allocations') + stat('Deallocations', int(x.num_deallocations)) +
        stat('Live allocations', int(x.live_allocations)) + '</div>' +
        (x.live_map_incomplete ? '<p class="note">Some allocations were made before liveprof saw them: live sizes are a lower bound.</p>' : '');
      const t = x.timeline;
      const inUse = t.stack_bytes.map((b, i) => b + t.heap_bytes[i]);
      // The y axis: the data (in use, reserved) with headroom; the capacity
      // joins it only when near (else a label says where it is).
      const dataMax = Math.max(0, x.peak_bytes, x.reserved_bytes ?? 0, ...inUse);
      const cap = x.capacity_bytes;
      const capNear = cap > 0 && cap <= 2 * dataMax;
      top = byteAxisTop(capNear ? Math.max(dataMax, cap) : dataMax);
      capacityNote.hidden = !(cap > 0);
      capacityNote.textContent = !(cap > 0) ? ''
        : capNear ? `Capacity ${bytes(cap)}: the dashed line.`
          : `Capacity ${bytes(cap)}: far above this scale (the peak is ${pct(100 * x.peak_bytes / cap, 2)} of it); the axis is scaled to the data.`;
      // "Free" is capacity (or reserved) minus in use: off the scale with a
      // far capacity, so shown only without one.
      timeline.show(3, !(cap > 0));
      timeline.setMarks(capNear ? [{value: cap, label: `capacity ${bytes(cap)}`, color: '#d62728'}] : []);
      // x: seconds before the view's time, so the axis does not slide.
      timeline.setData([t.ts_ns.map((v) => (v - m.now_ns) / 1e9), t.heap_bytes, t.stack_bytes, inUse,
        t.free_bytes, t.fragmentation_pct]);
      if (x.breakdown_at_peak) {
        const n = x.peak_allocations;
        const unattributed = x.peak_heap_bytes - x.peak_attributed_bytes;
        peakNote.textContent = `${int(n)} allocations live at the peak (${bytes(x.peak_heap_bytes)} of heap). ` +
          `Attributed to an op: ${int(x.peak_attributed_allocations)} of ${int(n)} allocations, ` +
          `${bytes(x.peak_attributed_bytes)} (${pct(x.peak_heap_bytes ? 100 * x.peak_attributed_bytes / x.peak_heap_bytes : 0, 1)}); ` +
          `unattributed ${bytes(unattributed)}.` +
          (x.peak_unseen_allocations > 0
            ? ` Also live at the peak but never seen allocated (freed after it): ${int(x.peak_unseen_allocations)} allocations, ${bytes(x.peak_unseen_bytes)}.`
            : '');
      } else {
        peakNote.textContent = 'no breakdown at the peak in this window (the peak came before the window, or no allocation was seen)';
      }
      const rows = x.breakdown_at_peak ? x.breakdown : [];
      for (const key of ANNOTATIONS) breakdown.showColumn(key, rows.some((r) => r[key]));
      breakdown.setRows(rows);
    }

    return {
      render({memory: m, status}) {
        if (!m) return;
        last = m;
        hostOnly = status?.has_device === false;
        draw(m);
      },
    };
  },
};
