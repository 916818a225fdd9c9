// Annotations: the user annotations view (the `annotations` view model), as
// Holistic Trace Analysis attributes kernels: per annotation name
// (record_function ranges, Kineto's user_annotation, LIVEPROF_SCOPE, NVTX
// ranges), its count and host time, and the GPU time of the kernels
// launched while it was the innermost annotation on the launching thread.
import {int, num, us} from '../format.js';
import {Table} from '../table.js';

const COLUMNS = [
  {key: 'name', label: 'Annotation', name: true},
  {key: 'count', label: 'Count', numeric: true, fmt: int},
  {key: 'host_ms', label: 'Host (ms)', numeric: true, fmt: (v) => num(v, 2)},
  {key: 'avg_host_us', label: 'Avg. host', numeric: true, fmt: (v) => us(v), title: 'in the unit of its magnitude'},
  {key: 'kernels', label: 'Kernels', numeric: true, fmt: int,
    title: 'kernels launched while this was the innermost annotation on the launching thread'},
  {key: 'gpu_ms', label: 'GPU (ms)', numeric: true, fmt: (v) => num(v, 3), title: 'those kernels\' time'},
];

export default {
  id: 'annotations',
  title: 'Annotations',
  topics: ['annotations'],

  mount(root) {
    root.innerHTML = `
      <section class="card"><h3>User annotations <span class="muted totals"></span></h3>
        <p class="muted empty">No annotations yet: <code>torch.profiler.record_function</code> ranges in a replayed
          trace, <code>liveprof.scope()</code> or <code>LIVEPROF_SCOPE</code> spans, NVTX ranges.</p>
        <div class="annotations-table"></div></section>`;
    const table = new Table(root.querySelector('.annotations-table'), COLUMNS,
      {filterKeys: ['name'], filterLabel: 'annotation', sort: {key: 'gpu_ms', desc: true}});
    const empty = root.querySelector('.empty');
    const totals = root.querySelector('.totals');
    return {
      render({annotations: a}) {
        if (!a) return;
        empty.hidden = a.rows.length > 0;
        table.setRows(a.rows);
        const kernels = a.kernels_attributed + a.kernels_unattributed;
        totals.textContent = a.rows.length
          ? `${int(a.rows.length)} annotations, since the start; ${int(a.kernels_attributed)} of ${int(kernels)} kernels ` +
            'launched inside one (the rest from threads or times with none, such as autograd\'s backward)'
          : '';
      },
    };
  },
};
