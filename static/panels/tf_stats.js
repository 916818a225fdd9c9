// TF stats: every framework op on the device and on the host, with self
// time; sortable and filterable tables, IDLE in or out, the four pies of
// self time (by op and by op type, device and host), and CSV export (the
// `tf_stats` view model).
import {pie} from '../charts.js';
import {num, pct, us} from '../format.js';
import {Table} from '../table.js';

const COLUMNS = [
  {key: 'rank', label: 'Rank', numeric: true},
  {key: 'type', label: 'Type'},
  {key: 'name', label: 'Operation', name: true, short: true},
  {key: 'occurrences', label: '#Occurrences', numeric: true},
  // Times in the unit of their magnitude ("269.6 ms", "812.0 µs"); sorted,
  // filtered and exported (CSV) in µs.
  {key: 'total_us', label: 'Total time', numeric: true, fmt: (v) => us(v)},
  {key: 'avg_us', label: 'Avg. time', numeric: true, fmt: (v) => us(v)},
  {key: 'self_us', label: 'Total self-time', numeric: true, fmt: (v) => us(v)},
  {key: 'avg_self_us', label: 'Avg. self-time', numeric: true, fmt: (v) => us(v)},
  {key: 'self_pct', label: 'Self-time %', numeric: true, fmt: (v) => pct(v, 2)},
  {key: 'cumulative_pct', label: 'Cumulative self-time %', numeric: true, fmt: (v) => pct(v, 2)},
];

function byKey(rows, key) {
  const m = new Map();
  for (const r of rows) m.set(r[key], (m.get(r[key]) ?? 0) + r.self_us);
  return [...m].map(([label, value]) => ({label, value}));
}

export default {
  id: 'tf_stats',
  title: 'TF stats',
  topics: ['tf_stats'],
  csv: 'tf_stats',

  mount(root, ctx) {
    root.innerHTML = `
      <section class="card"><h3>Self time <span class="muted totals"></span></h3><div class="pies">
        <div class="pie" data-pie="device-type"></div><div class="pie" data-pie="device-op"></div>
        <div class="pie" data-pie="host-type"></div><div class="pie" data-pie="host-op"></div></div></section>
      <section class="card"><h3>Operations
        <label><input type="checkbox" class="idle" checked> include IDLE</label>
        <button class="csv">Export CSV</button></h3>
        <div class="device-part"><h4>On the device</h4><div class="device"></div></div>
        <p class="muted no-device" data-field="no_device" hidden></p>
        <h4>On the host</h4><p class="muted host-note" data-field="host_note"></p><div class="host"></div></section>`;
    const options = {filterKeys: ['name', 'type'], filterLabel: 'op name or type', sort: {key: 'rank', desc: false}};
    const device = new Table(root.querySelector('.device'), COLUMNS, options);
    const host = new Table(root.querySelector('.host'), COLUMNS, options);
    const idle = root.querySelector('.idle');
    idle.addEventListener('change', () => ctx.setParams('tf_stats', idle.checked ? {} : {include_idle: 'false'}));
    root.querySelector('.csv').addEventListener('click', () => ctx.exportCsv('tf_stats'));
    const pieEl = (name) => root.querySelector(`[data-pie="${name}"]`);
    const fmt = (v) => `${num(v / 1e3, 1)} ms`;

    return {
      render({tf_stats: t, status}) {
        if (!t) return;
        device.setRows(t.device.rows);
        host.setRows(t.host.rows);
        // A job with no device: its host's ops only, and a line that says so
        // (a job with a GPU whose window has no device op yet keeps both).
        const cpuOnly = t.device.total_us === 0;
        const noDevice = cpuOnly && status?.has_device === false;
        root.querySelector('.device-part').hidden = noDevice;
        for (const name of ['device-type', 'device-op']) pieEl(name).hidden = noDevice;
        const line = root.querySelector('.no-device');
        line.hidden = !noDevice;
        line.textContent = noDevice ? 'This job has no device (no GPU was seen): every op ran on the host, below.' : '';
        root.querySelector('.totals').textContent = (cpuOnly ? 'no device; ' :
          `device ${num(t.device.total_us / 1e3, 1)} ms (ops ${num(t.device.op_us / 1e3, 1)}, IDLE ${num(t.device.idle_us / 1e3, 1)}); `) +
          `host ${num(t.host.total_us / 1e3, 1)} ms${t.include_idle ? '' : ` — ${cpuOnly ? 'unattributed host time' : 'IDLE'} excluded`}`;
        // Where the host's breakdown ends (liveprof run at the default level:
        // the model's forward and backward), and how to go further.
        const passes = t.host.rows.some((r) => r.name.startsWith('nn.Module.forward: ') || r.name.startsWith('autograd.'));
        root.querySelector('.host-note').textContent = (cpuOnly
          ? 'No device: a host thread\'s time outside its ops is the program\'s own compute that no op names ' +
            '(the optimizer\'s step, the loss, Python): "Host compute (unattributed)", not IDLE. ' : '') +
          (passes ? 'liveprof run records the model\'s forward ("nn.Module.forward: …") and each backward pass ' +
            '("autograd.backward") at this level; host level 3 (Sources page, capture on demand) breaks them ' +
            'down by module (the Modules page).' : '');
        pie(pieEl('device-type'), 'Device: by op type', byKey(t.device.rows, 'type'), {fmt});
        pie(pieEl('device-op'), 'Device: by op', byKey(t.device.rows, 'name'), {fmt});
        pie(pieEl('host-type'), 'Host: by op type', byKey(t.host.rows, 'type'), {fmt});
        pie(pieEl('host-op'), 'Host: by op', byKey(t.host.rows, 'name'), {fmt});
      },
    };
  },
};
