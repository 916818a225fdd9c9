// GPU kernel stats: every kernel (name, launch shape, occupancy, Tensor Core
// use, its framework op) with its durations; the top kernels and the
// duration histogram of the one selected (the `kernel_stats` view model).
import {Bars, barList} from '../charts.js';
import {duration, esc, int, num, pct, us} from '../format.js';
import {Table} from '../table.js';
import {stat} from './common.js';

export default {
  id: 'kernel_stats',
  title: 'GPU kernel stats',
  topics: ['kernel_stats'],
  csv: 'kernel_stats',

  mount(root, ctx) {
    root.innerHTML = `
      <p class="card no-device" data-field="no_device" hidden></p>
      <div class="grid2">
        <section class="card"><h3>Top 10 kernels by total time <span class="muted totals"></span></h3><div class="top"></div></section>
        <section class="card"><h3>Duration histogram: <span class="hist-name muted">click a kernel</span></h3>
          <div class="stats hist-stats"></div><div class="chart hist"></div></section>
      </div>
      <section class="card"><h3>Kernels <button class="csv">Export CSV</button></h3><div class="kernels"></div></section>`;
    let selected = null;
    let last = null;
    const table = new Table(root.querySelector('.kernels'), [
      {key: 'rank', label: 'Rank', numeric: true},
      {key: 'kernel_name', label: 'Kernel', name: true, short: true},
      {key: 'op_name', label: 'Framework op', name: true, short: true},
      {key: 'occurrences', label: 'Occurrences', numeric: true},
      {key: 'total_us', label: 'Total', numeric: true, fmt: (v) => us(v)},
      {key: 'avg_us', label: 'Avg', numeric: true, fmt: (v) => us(v)},
      {key: 'min_us', label: 'Min', numeric: true, fmt: (v) => us(v)},
      {key: 'max_us', label: 'Max', numeric: true, fmt: (v) => us(v)},
      {key: 'registers_per_thread', label: 'Registers per thread', numeric: true},
      {key: 'shared_mem_bytes', label: 'Shared mem (B)', numeric: true, fmt: int},
      {key: 'block', label: 'Block'},
      {key: 'grid', label: 'Grid'},
      {key: 'occupancy_pct', label: 'Occupancy', numeric: true, fmt: (v) => pct(v, 0)},
      {key: 'kernel_uses_tc', label: 'Uses TC', fmt: (v) => (v ? 'yes' : 'no')},
      {key: 'op_tc_eligible', label: 'Op TC eligible', fmt: (v) => (v ? 'yes' : 'no')},
    ], {
      filterKeys: ['kernel_name', 'op_name'], filterLabel: 'kernel or op name', sort: {key: 'rank', desc: false},
      rowKey: (r) => r.kernel_name, onRowClick: (r) => {
        selected = r.kernel_name;
        if (last) showHistogram(last);
      },
    });
    const hist = new Bars(root.querySelector('.hist'), {label: 'kernels', color: '#4e79a7', xLabel: 'duration (µs)', yLabel: 'count',
      xfmt: (v) => num(v, 1)});
    root.querySelector('.csv').addEventListener('click', () => ctx.exportCsv('kernel_stats'));

    // The selected kernel's histogram (the top kernel's until one is clicked).
    // Histograms are kept for the top kernels only; another one says so.
    function showHistogram(k) {
      const h = selected === null ? k.histograms[0] : k.histograms.find((x) => x.kernel_name === selected);
      const name = root.querySelector('.hist-name');
      if (!h) {
        name.textContent = selected === null ? 'no kernel yet'
          : `${selected}: no histogram kept (the server keeps one for each of the top ${k.histograms.length} kernels)`;
        root.querySelector('.hist-stats').innerHTML = '';
        hist.setData([], []);
        return;
      }
      name.textContent = h.kernel_name;
      root.querySelector('.hist-stats').innerHTML = stat('count', int(h.count)) + stat('p50', duration(h.p50_ns)) +
        stat('p90', duration(h.p90_ns)) + stat('p99', duration(h.p99_ns)) + stat('min', duration(h.min_ns)) + stat('max', duration(h.max_ns));
      hist.setData(h.buckets.map((b) => b.lo_ns / 1e3), h.buckets.map((b) => b.count));
    }

    return {
      render({kernel_stats: k, status}) {
        if (!k) return;
        last = k;
        // A job with no device has no kernels: the page says so, and where
        // its time is, instead of empty tables.
        const noDevice = status?.has_device === false && !k.rows.length;
        const line = root.querySelector('.no-device');
        line.hidden = !noDevice;
        line.textContent = noDevice ? 'No GPU kernels: this job has no device (no GPU was seen; the Overview\'s run ' +
          'environment says why). Its ops ran on the host: TF stats lists them, the Trace viewer shows them.' : '';
        for (const el of root.querySelectorAll(':scope > .grid2, :scope > section')) el.hidden = noDevice;
        table.setRows(k.rows);
        root.querySelector('.totals').innerHTML =
          `<span data-field="kernel_count">${esc(int(k.kernel_count))}</span> kernels, ${esc(duration(k.kernel_ns))}, ${esc(int(k.distinct_rows))} distinct` +
          // Uses TC and this share: what ran on Tensor Cores, by kernel family.
          (k.kernel_ns ? `, <span data-field="tensor_core_pct" title="${esc(k.tensor_core_definition ?? '')}">${
            esc(pct(k.tensor_core_pct, 2))} of kernel time on Tensor Cores</span>` : '');
        const top = k.rows.slice().sort((a, b) => b.total_us - a.total_us).slice(0, 10);
        barList(root.querySelector('.top'), top.map((r) => ({label: r.kernel_name, value: r.total_us, text: `${num(r.total_us / 1e3, 2)} ms`})));
        showHistogram(k);
      },
    };
  },
};
