// The trace canvas's colours, from the page's theme: style.css's --trace-*
// custom properties on .trace-canvas-box, light or dark as the system asks
// (prefers-color-scheme). Read once per theme change, never per frame:
// `colors` is what draw.js and counters.js paint with; watchTheme reads them
// now and again whenever the system's scheme changes, then calls back.
// Slices keep their colour per name (draw.js's colorOf) in both themes.

const PROPERTIES = {
  bg: '--trace-bg',                 // a row's background
  axisBg: '--trace-axis-bg',        // the axis's band and the gutter's corner
  sectionBg: '--trace-section-bg',  // a section's title row
  grid: '--trace-grid',             // the ticks' lines, the gutter's edge
  rowLine: '--trace-row-line',      // between rows
  text: '--trace-text',             // section titles
  label: '--trace-label',           // row labels, the axis's labels, counters' labels
  muted: '--trace-muted',           // the span in view
  pin: '--trace-pin',               // an unpinned row's pin
  accent: '--trace-accent',         // the selection, a pinned row's pin, the timing tool, the box
  onAccent: '--trace-on-accent',    // text on the accent
  sliceText: '--trace-slice-text',  // a slice's name on its (light) colour
  flow: '--trace-flow',             // launch -> device work arrows
  hit: '--trace-hit',               // the search hit
  hitLine: '--trace-hit-line',
  counterFill: '--trace-counter-fill',
  counterLine: '--trace-counter-line',
  labelBand: '--trace-label-band',  // behind a counter's labels
  timingFill: '--trace-timing-fill',
};

// The light theme, as style.css has it: what is drawn before (or without) the stylesheet.
export const colors = {
  bg: '#fff', axisBg: '#f8f9fa', sectionBg: '#eef1f4', grid: '#dde2e7', rowLine: '#eceff1', text: '#1d2329',
  label: '#3c4043', muted: '#69737d', pin: '#c4c9ce', accent: '#1a73e8', onAccent: '#fff', sliceText: '#1d2329',
  flow: 'rgba(60, 64, 67, 0.75)', hit: '#fdd663', hitLine: '#e37400', counterFill: 'rgba(26, 115, 232, 0.35)',
  counterLine: '#1a73e8', labelBand: 'rgba(255, 255, 255, 0.85)', timingFill: 'rgba(26, 115, 232, 0.10)',
  dark: false,
};

const DARK = '(prefers-color-scheme: dark)';

// Reads the colours in force on `el` (a .trace-canvas-box); its data-theme says which.
export function readTheme(el) {
  const style = getComputedStyle(el);
  for (const [key, name] of Object.entries(PROPERTIES)) {
    const v = style.getPropertyValue(name).trim();
    if (v) colors[key] = v;
  }
  colors.dark = window.matchMedia?.(DARK).matches ?? false;
  el.dataset.theme = colors.dark ? 'dark' : 'light';  // (what tests read)
  return colors;
}

// Reads them now, and again (then `onChange()`) when the system's scheme changes.
export function watchTheme(el, onChange) {
  readTheme(el);
  window.matchMedia?.(DARK).addEventListener('change', () => {
    readTheme(el);
    onChange();
  });
}
