// The labels' gutter's right edge, a handle to drag (as Perfetto's track
// shell): the rows' names get the room they need. Its width is kept in
// localStorage (every trace viewer of this origin opens with it), within
// layout.js's bounds; a double click (or Home) gives back the default, the
// arrow keys move it 10 px when it has the focus. The full name of a row is
// also on hover (trace_viewer.js's tooltip), at any width.
import {GUTTER, GUTTER_DEFAULT, setGutter} from './layout.js';

export const GUTTER_KEY = 'liveprof.trace.gutter';
const HANDLE_W = 7;
const STEP_PX = 10;

function stored() {
  try {
    return Number(localStorage.getItem(GUTTER_KEY)) || GUTTER_DEFAULT;
  } catch {
    return GUTTER_DEFAULT;  // (storage refused: a private window's policy)
  }
}

function store(px) {
  try {
    if (px === GUTTER_DEFAULT) localStorage.removeItem(GUTTER_KEY);
    else localStorage.setItem(GUTTER_KEY, String(px));
  } catch { /* not kept: it still applies here */ }
}

// `box`: the .trace-canvas-box; `width()`: the canvas's css width now;
// `onChange()`: after each change (redraw, and a tile for the new width).
export function mountGutter(box, {width, onChange}) {
  const handle = document.createElement('div');
  handle.className = 'trace-gutter-handle';
  handle.tabIndex = 0;
  handle.setAttribute('role', 'separator');
  handle.setAttribute('aria-orientation', 'vertical');
  handle.setAttribute('aria-label', 'width of the row names');
  handle.title = 'drag: the names\' width; double click: back to the default';
  box.append(handle);
  const place = () => {
    handle.style.left = `${GUTTER - Math.ceil(HANDLE_W / 2)}px`;
    handle.setAttribute('aria-valuenow', String(GUTTER));
    box.dataset.gutter = String(GUTTER);
  };
  const set = (px, keep) => {
    const before = GUTTER;
    setGutter(px, width());
    place();
    if (keep) store(GUTTER);
    if (GUTTER !== before) onChange();
  };
  set(stored(), false);

  handle.addEventListener('mousedown', (e) => {
    if (e.button !== 0) return;
    e.preventDefault();
    e.stopPropagation();
    const x0 = e.clientX, w0 = GUTTER;
    box.classList.add('resizing');
    const move = (m) => set(w0 + m.clientX - x0, false);
    const up = () => {
      window.removeEventListener('mousemove', move);
      window.removeEventListener('mouseup', up);
      box.classList.remove('resizing');
      store(GUTTER);
    };
    window.addEventListener('mousemove', move);
    window.addEventListener('mouseup', up);
  });
  handle.addEventListener('dblclick', () => set(GUTTER_DEFAULT, true));
  handle.addEventListener('keydown', (e) => {
    const to = {ArrowLeft: GUTTER - STEP_PX, ArrowRight: GUTTER + STEP_PX, Home: GUTTER_DEFAULT}[e.key];
    if (to === undefined) return;
    e.preventDefault();
    e.stopPropagation();  // (not the timeline's A/D)
    set(to, true);
  });
  // The canvas narrower than the gutter allows (a smaller window): kept within it.
  return {fit: () => set(stored(), false)};
}
