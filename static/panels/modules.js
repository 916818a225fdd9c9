// Modules: PyTorch's module view, live: per nn.Module its calls, forward
// time (total and self), backward time, and on CUDA the memory its forward
// keeps (the `modules` view model). Filled by `liveprof run`'s hooks at
// host trace level 3 (docs/attach.md); until then, how to turn them on.
import {bytes, int, num, us} from '../format.js';
import {Table} from '../table.js';

const COLUMNS = [
  {key: 'name', label: 'Module', name: true},
  {key: 'calls', label: 'Calls', numeric: true, fmt: int},
  {key: 'forward_ms', label: 'Forward (ms)', numeric: true, fmt: (v) => num(v, 2)},
  {key: 'forward_self_ms', label: 'Forward self (ms)', numeric: true, fmt: (v) => num(v, 2),
    title: 'forward time less its child modules\''},
  {key: 'avg_forward_us', label: 'Avg. forward', numeric: true, fmt: (v) => us(v)},
  {key: 'backward_ms', label: 'Backward (ms)', numeric: true, fmt: (v, r) => (r.backward_calls ? num(v, 2) : '—'),
    title: 'from its output\'s gradient reaching it to its inputs\' and parameters\' gradients'},
  {key: 'avg_backward_us', label: 'Avg. backward', numeric: true, fmt: (v, r) => (r.backward_calls ? us(v) : '—'),
    title: '— : no backward observed (a module fed with data that has no parameters of its own)'},
  {key: 'memory_bytes_last', label: 'Memory kept (last)', numeric: true, fmt: (v) => (v === null ? '—' : bytes(v)),
    title: 'CUDA bytes its forward left allocated: activations and outputs'},
  {key: 'memory_bytes_max', label: 'Memory kept (max)', numeric: true, fmt: (v) => (v === null ? '—' : bytes(v))},
];

export default {
  id: 'modules',
  title: 'Modules',
  topics: ['modules'],

  mount(root) {
    root.innerHTML = `
      <section class="card"><h3>PyTorch modules <span class="muted totals"></span></h3>
        <p class="muted empty">No module spans yet. They come from a PyTorch job under <code>liveprof run</code> at host
          trace level 3: <code>LIVEPROF_HOST_LEVEL=3</code> in its environment, or the Capture page's host level 3 for
          a while.</p>
        <div class="modules-table"></div></section>`;
    const table = new Table(root.querySelector('.modules-table'), COLUMNS,
      {filterKeys: ['name'], filterLabel: 'module', sort: {key: 'forward_ms', desc: true}});
    const empty = root.querySelector('.empty');
    const totals = root.querySelector('.totals');
    return {
      render({modules: m}) {
        if (!m) return;
        empty.hidden = m.rows.length > 0;
        table.setRows(m.rows);
        const over = m.modules_over_cap ? `; ${int(m.modules_over_cap)} events of modules past the first 4,096 left out` : '';
        totals.textContent = m.rows.length ? `${int(m.rows.length)} modules, since the start${over}` : '';
      },
    };
  },
};
