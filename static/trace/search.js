// The trace viewer's search box, as Perfetto's omnibox: Enter finds the
// next event named like the text (Shift+Enter the previous), says which of
// how many matches it is ("3 of 120", the server's count), frames and
// highlights it, and hands the keyboard back to the timeline (the box
// blurs: W/A/S/D navigate again); Enter / Shift+Enter keep stepping from
// there, and the ◀ ▶ buttons do the same. Escape leaves the box. Past the
// last match it goes round to the first.
import {esc} from '../format.js';

// `get(path, params)`: the /api read; `view()` the {t0, t1} on screen, where
// a new search starts; `onHit(event)` shows the hit; `onNone(q)` says
// nothing matched; `focusTimeline()` takes the keyboard back.
export function mountSearch(root, {get, view, onHit, onNone, onError, focusTimeline}) {
  const box = root.querySelector('.search');
  const count = root.querySelector('.search-count');
  const state = {q: '', hit: null, matches: 0, index: 0};

  function show() {
    count.textContent = state.q ? (state.hit ? `${state.index} of ${state.matches}` : `0 of ${state.matches}`) : '';
  }

  async function find(forward, shown) {
    const q = box.value.trim();
    if (!q) return;
    if (q !== state.q) Object.assign(state, {q, hit: null, matches: 0, index: 0});
    const params = {q, dir: forward ? 'next' : 'prev'};
    if (state.hit) {
      params.from = state.hit.ts;
      params.from_id = state.hit.id;
    } else if (shown) {
      params.from = Math.max(0, Math.floor(forward ? shown.t0 - 1 : shown.t1 + 1));
    }
    try {
      let r = await get('trace/search', params);
      if (!r.event && r.matches > 0) {  // past the last (first): round to the first (last).
        r = await get('trace/search', forward ? {q, dir: 'next', from: 0, from_id: 0} : {q, dir: 'prev'});
      }
      if (q !== box.value.trim()) return;  // typed on meanwhile.
      state.matches = r.matches;
      if (r.event) {
        state.hit = r.event;
        state.index = r.index;
        show();
        onHit(r.event);
      } else {
        state.hit = null;
        show();
        onNone(q);
      }
    } catch (err) {
      onError(err);
    }
  }

  box.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') {
      e.preventDefault();
      focusTimeline();  // the keys are the timeline's again.
      find(!e.shiftKey, view());
    } else if (e.key === 'Escape') {
      e.preventDefault();
      focusTimeline();
    }
  });
  box.addEventListener('input', () => {
    if (box.value.trim() !== state.q) {
      Object.assign(state, {q: '', hit: null, matches: 0, index: 0});
      show();
    }
  });
  root.querySelector('.next').addEventListener('click', () => find(true, view()));
  root.querySelector('.prev').addEventListener('click', () => find(false, view()));
  return {
    state,
    find: (forward) => find(forward, view()),
    active: () => !!state.q,
    clear() {
      Object.assign(state, {q: '', hit: null, matches: 0, index: 0});
      show();
    },
  };
}

export function noMatch(q) {
  return `<p class="muted">No event named like “${esc(q)}”.</p>`;
}
