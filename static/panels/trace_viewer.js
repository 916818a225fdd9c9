// The trace viewer's tab. The streaming viewer (every event, only the
// viewport's sent) is its own work item (issue #7); until it lands this tab
// says where the raw events are today.
export default {
  id: 'trace_viewer',
  title: 'Trace viewer',
  topics: [],

  mount(root) {
    root.innerHTML = `<section class="card"><h3>Trace viewer</h3>
      <p>The streaming trace viewer (every event kept, only what the viewport needs sent, no event cap) is
      not built yet. The raw events are already live on the WebSocket feed's <code>events</code> topic as
      FlatBuffers frames: see <code>docs/protocol.md</code> in the liveprof repository, section
      “The events topic: binary frames”.</p></section>`;
    return {render() {}};
  },
};
