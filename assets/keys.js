// carelens: keys that never go astray, and count only on what was read
// (pages/_keys.py mounts this; review/reviewing/presses.py holds the rule).
//
// Loads nothing from anywhere; touches no text from the data (what it shows
// is its own fixed words and the screen's, set as textContent). One listener
// for the whole page, installed once, whatever the number of mounts:
//
// - a key that answers, picks or settles counts only once what it acts on
//   has been on screen for the least dwell (`dwell_ms`, from
//   CARELENS_MIN_DWELL_MS) since it was drawn, and as long since the last
//   key refused on that screen (a burst stays refused until it stops): an
//   earlier one is refused at once, never sent, and said beside the answers
//   (`slot`) in the screen's words (`too_soon`). What a screen's keys act on
//   is its marker's token (`.st-key-at_<token>`); the time each token was
//   first drawn on this page is kept (`drawn`);
// - a screen's shortcut pressed while the screen is being redrawn (the
//   script running, or elements still loading) is held, not sent to a button
//   that is about to go: once the screen is still, it is applied if the
//   screen shows what it showed when the key was pressed (the same token), or
//   if it is a relative move (Left, Right, Up, Down, the screen's undo: "one
//   more"); otherwise it is refused, and said;
// - after a choice in a drop-down list, the focus goes back to the page, so
//   the next key is a shortcut, not a letter typed into the list;
// - a key that puts the focus in a box (S: the reason for a skip);
// - scrolling the judged text into view inside its scrolling box.
//
// It never asks the server for a run of its own (no timers): every run costs
// the server as much as an answer.

const STATE = '__carelensKeys';
const TOO_SOON = 'Not recorded: too soon after the last answer. Press again to answer this one.';

function canonical(e) {
  // "ctrl+shift+1", "left", "f": as pages/_keys.py writes a shortcut.
  let base = e.key || '';
  if (/^Digit\d$/.test(e.code)) base = e.code.slice(5);
  else if (/^Numpad\d$/.test(e.code)) base = e.code.slice(6);
  else if (/^Key[A-Z]$/.test(e.code)) base = e.code.slice(3);
  base = base.toLowerCase().replace(/^arrow/, '');
  if (base === ' ') base = 'space';
  const mods = [];
  if (e.ctrlKey) mods.push('ctrl');
  if (e.altKey) mods.push('alt');
  if (e.shiftKey) mods.push('shift');
  if (e.metaKey) mods.push('meta');
  return [...mods, base].join('+');
}

function typing(target) {
  // Where a key is text, not a shortcut (as Streamlit's own shortcuts decide).
  if (!target || !target.tagName) return false;
  if (target.isContentEditable) return true;
  const tag = target.tagName;
  if (tag === 'TEXTAREA' || tag === 'SELECT') return true;
  return tag === 'INPUT' && !['checkbox', 'radio', 'range', 'button', 'file', 'reset',
    'submit', 'color'].includes(target.type);
}

function appBusy() {
  // Busy: a run is on, elements are still loading, or a press has gone to the
  // server and its run has not been seen to end yet (the request is in flight:
  // the screen still shows the item the press was for, and a second key would
  // go to a button about to go).
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.dataset.testScriptState !== 'notRunning') return true;
  const state = window[STATE];
  if (state && state.sentAt !== null) {
    const now = performance.now();
    // Over once a run that started after the press has ended (a run already on
    // when it was sent is another press's); or, with no run seen, after 10 s (a
    // busy server can take seconds to begin the run, and until it has, the screen
    // still shows what the press was for: a key let through then went to a
    // button about to go, the redraw guard's leak on a busy machine).
    if (state.endedStart >= state.sentAt || now - state.sentAt > (state.started >= state.sentAt
                                                                   ? 30000 : 10000)) {
      state.sentAt = null;
    } else {
      return true;
    }
  }
  return !!document.querySelector('[data-testid*="Skeleton"]');
}

function watchRuns(state) {
  // When runs start and end: a press is over once a run after it has ended.
  // Every change of the run state is read from the records (a run over before
  // the observer was called is still seen).
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app) {
    setTimeout(() => watchRuns(state), 20);
    return;
  }
  let was = app.dataset.testScriptState;
  new MutationObserver((records) => {
    const values = [...records.map(r => r.oldValue), app.dataset.testScriptState];
    const now = performance.now();
    for (const value of values.slice(1)) {
      if (value === was) continue;
      if (value === 'running') state.started = now;
      if (was === 'running') state.endedStart = state.started;
      was = value;
    }
  }).observe(app, {attributes: true, attributeFilter: ['data-test-script-state'],
                   attributeOldValue: true});
}

function markerTokens(prefix) {
  // [marker element, its class] for every marker on the page now (a screen's
  // alone, with its `prefix`: "st-key-at_<screen>__").
  const start = prefix || 'st-key-at_';
  return [...document.querySelectorAll('[class*="st-key-at_"]')].map(m => {
    const cls = [...m.classList].find(k => k.startsWith(start));
    return cls ? [m, cls] : null;
  }).filter(Boolean);
}

function tokensOf(state, id) {
  // What screen `id`'s markers show now (every screen's, with no id). During a
  // redraw a marker not yet redrawn still says what the clinician is looking at.
  const screen = id ? state.screens.get(id) : null;
  const prefix = screen && screen.marker;
  const tokens = markerTokens(prefix).map(([, cls]) => cls);
  return [...new Set(tokens)].sort();
}

function shownToken(state, id) {
  const tokens = tokensOf(state, id);
  return tokens.length ? tokens.join('|') : null;
}

function noteDrawn(state) {
  // When each marker was first drawn (in the page, with something in it); a
  // token gone from a still screen is forgotten, so an item shown again (Back)
  // is timed afresh.
  state.drawScheduled = false;
  const now = performance.now();
  const present = new Set();
  for (const [m, token] of markerTokens(null)) {
    present.add(token);
    if (!state.drawn.has(token) && m.getBoundingClientRect().height > 0) state.drawn.set(token, now);
  }
  if (!appBusy()) {
    for (const token of [...state.drawn.keys()]) if (!present.has(token)) state.drawn.delete(token);
  }
}

function reveal(state) {
  // The page's first screen is shown (assets/carelens.css hides it until then)
  // once its first run is over, every element is drawn, and every screen's keys
  // have said what they act on: from then on a key on it is taken or refused,
  // and said, never lost to a button not yet drawn or a screen not yet timed.
  if (document.body.dataset.carelensKeys) return;
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.dataset.testScriptState !== 'notRunning') return;
  if (document.querySelector('[data-testid="stMain"] [data-testid*="Skeleton"]')) return;
  for (const el of document.querySelectorAll('[data-testid="stMain"] [class*="st-key-keys_"]')) {
    const cls = [...el.classList].find(c => c.startsWith('st-key-keys_'));
    const id = cls && cls.slice('st-key-'.length);
    if (id && id !== 'keys_page' && !state.screens.has(id)) return;  // keys_page: app.py's
  }
  document.body.dataset.carelensKeys = 'live';
  noteDrawn(state);
  // Shown only now: what is on screen is timed from now.
  const now = performance.now();
  for (const [, token] of markerTokens(null)) state.drawn.set(token, now);
}

function watchDrawing(state) {
  // Each change to the page: the markers looked at once, at the next frame.
  new MutationObserver(() => {
    if (state.drawScheduled) return;
    state.drawScheduled = true;
    requestAnimationFrame(() => noteDrawn(state));
  }).observe(document.body, {childList: true, subtree: true});
}

function tooSoon(state, id, now) {
  // The rule (review/reviewing/presses.py) on this page's clock: what screen
  // `id`'s keys act on drawn at least `dwell` ago, and no key refused on it
  // within `dwell`.
  const screen = state.screens.get(id);
  const dwell = screen ? screen.dwell : 0;
  if (!dwell) return false;
  const refused = state.refusedAt.has(id) ? state.refusedAt.get(id) : -Infinity;
  if (now - refused < dwell) return true;
  // Nothing counts before the server has heard that these keys are live (its
  // clock starts then: this one no earlier, so it is never the laxer of the two).
  if (screen.live === null) return true;
  const tokens = tokensOf(state, id);
  const drawnAt = tokens.length
    ? Math.max(...tokens.map(t => (state.drawn.has(t) ? state.drawn.get(t) : now)))
    : screen.since;
  return now - Math.max(drawnAt, screen.live) < dwell;
}

function buttonFor(cls) {
  const holder = cls && document.querySelector('.' + CSS.escape(cls));
  if (!holder) return null;
  const button = holder.matches('button') ? holder : holder.querySelector('button');
  return button && !button.disabled ? button : null;
}

function note(state, what) {
  // The last decisions, for a test or a curious developer (window.__carelensKeys.log).
  state.log.push([Math.round(performance.now()), what]);
  if (state.log.length > 60) state.log.shift();
}

function notice(state, id, words) {
  // Said beside the answers of screen `id` (its slot), else at the bottom left.
  let box = state.noticeBox;
  if (!box) {
    box = state.noticeBox = document.createElement('div');
    box.id = 'carelens-key-notice';
    box.setAttribute('role', 'status');
    box.setAttribute('aria-live', 'polite');
    box.setAttribute('data-testid', 'carelensKeyNotice');
  }
  box.textContent = words;
  state.notice = {id, until: performance.now() + 8000};
  placeNotice(state);
}

function hideNotice(state, id) {
  if (state.notice && (id === undefined || state.notice.id === id)) {
    state.notice.until = 0;
    placeNotice(state);
  }
}

function placeNotice(state) {
  // Kept in its slot while it is due (a redraw may make the slot anew).
  const box = state.noticeBox;
  if (!box) return;
  const on = state.notice && performance.now() < state.notice.until;
  const screen = state.notice && state.screens.get(state.notice.id);
  // Under the element the screen names (a class, or a marker's class prefix).
  const after = on && screen && screen.slot
    ? document.querySelector(`[class*="${CSS.escape(screen.slot)}"]`) : null;
  if (!on) {
    box.style.display = 'none';
    return;
  }
  if (after) {
    if (box.previousElementSibling !== after) after.after(box);
    box.dataset.place = 'beside';
  } else {
    if (box.parentElement !== document.body) document.body.appendChild(box);
    box.dataset.place = 'corner';
  }
  box.style.display = 'block';
}

function pressedAt(e) {
  // When a key went down, on this page's clock (performance.now()'s).
  const t = e && e.timeStamp;
  return typeof t === 'number' && t > 0 && t <= performance.now() ? t : performance.now();
}

function refuse(state, id, words, what, at) {
  // A key not taken: said, and the next keys on this screen wait for the dwell
  // from when it was pressed (`at`; a held key refused later: from then).
  const was = state.refusedAt.has(id) ? state.refusedAt.get(id) : -Infinity;
  state.refusedAt.set(id, Math.max(was, at === undefined ? performance.now() : at));
  note(state, what);
  const screen = state.screens.get(id);
  notice(state, id, words || (screen && screen.tooSoon) || TOO_SOON);
}

function visibleIn(el) {
  // Scroll `el` into view inside its scrolling box (not the page): its top when
  // it is taller than the box, else all of it.
  let box = el.parentElement;
  while (box && !(box.scrollHeight > box.clientHeight + 2
                  && /(auto|scroll)/.test(getComputedStyle(box).overflowY))) {
    box = box.parentElement;
  }
  if (!box || box === document.scrollingElement || box === document.body) return;
  const b = box.getBoundingClientRect();
  const r = el.getBoundingClientRect();
  if (r.height >= b.height || r.top < b.top) box.scrollTop += r.top - b.top - 4;
  else if (r.bottom > b.bottom) box.scrollTop += r.bottom - b.bottom + 4;
}

function flush(state) {
  // Apply or refuse held keys, one at a time, each once the screen is still.
  clearTimeout(state.flushTimer);
  if (!state.held.length) return;
  if (appBusy()) {
    state.stillSince = null;
    state.flushTimer = setTimeout(() => flush(state), 25);
    return;
  }
  const now = performance.now();
  if (state.stillSince === null) state.stillSince = now;
  if (now - state.stillSince < 60) {  // not a pause between two runs
    state.flushTimer = setTimeout(() => flush(state), 25);
    return;
  }
  noteDrawn(state);
  const entry = state.held.shift();
  const id = entry.screen === null ? screenFor(state, entry.key) : entry.screen;
  const screen = id ? state.screens.get(id) : null;
  const token = shownToken(state, id);
  const same = entry.token !== null && entry.token === token;
  const relative = screen && (screen.nav.includes(entry.key) || screen.relative.includes(entry.key));
  // A key held before any screen was there: the dwell is checked now, on what it would act on.
  const early = entry.screen === null && screen && !relative && tooSoon(state, id, entry.at);
  // A key refused after this one was pressed: the burst it belongs to is not taken, the
  // keys held in it included (applied later, they would act on what was not read).
  const behind = id && state.refusedAt.has(id) && state.refusedAt.get(id) > entry.at;
  if (behind) {
    note(state, `dropped ${entry.key} and ${state.held.length} after it: a key behind them was refused`);
    state.held = [];
    state.flushTimer = setTimeout(() => flush(state), 25);
    return;
  }
  if (screen && !early && (same || (relative && entry.token !== null))) {
    const button = buttonFor(screen.buttons[entry.key]);
    if (button) {
      state.stillSince = null;
      state.sentAt = performance.now();
      note(state, `applied ${entry.key} at ${token}`);
      if (!relative) hideNotice(state, id);
      button.click();
    } else {
      note(state, `no button for ${entry.key}`);
    }
  } else {
    // Refused, and so are the keys typed after it: they were meant to follow it
    // (Y N Y: once the N is refused, the second Y would land on N's criterion).
    const also = state.held.length;
    state.held = [];
    refuse(state, id, null, `refused ${entry.key} pressed at ${entry.token}, now ${token}`
      + (also ? `, and ${also} after it` : ''));
  }
  state.flushTimer = setTimeout(() => flush(state), 25);
}

function screenFor(state, key) {
  // The mounted screen that has this key, if any.
  for (const [id, screen] of state.screens) {
    if ((key in screen.buttons || key in screen.focus)
        && document.querySelector('.st-key-' + CSS.escape(id))) return id;
  }
  return null;
}

function install() {
  const state = {screens: new Map(), held: [], stillSince: null, flushTimer: null,
                 scrolled: new Set(), scrollTries: new Map(), sentAt: null, started: -1,
                 endedStart: -1, refusedAt: new Map(), drawn: new Map(), drawScheduled: false,
                 notice: null, noticeBox: null, log: [], gates: new Map()};
  window[STATE] = state;
  // Whether no press is in flight and no key is held (a test waits for it after
  // a key: a busy server may not have begun the key's run yet).
  state.quiet = () => !appBusy() && !state.held.length;
  // Whether every screen's keys would count now (for tests and benches, which
  // wait for it as a clinician reads before answering).
  state.dwellOver = () => {
    const now = performance.now();
    noteDrawn(state);
    for (const id of state.screens.keys()) {
      if (document.querySelector('.st-key-' + CSS.escape(id)) && tooSoon(state, id, now)) return false;
    }
    return true;
  };
  watchRuns(state);
  watchDrawing(state);

  window.addEventListener('keydown', (e) => {
    if (e.__carelensReplay || typing(e.target)) return;
    const key = canonical(e);
    const id = screenFor(state, key);
    if (!id && appBusy() && /^(shift\+)?[0-9a-z]$|^(left|right|up|down)$|^ctrl\+enter$/.test(key)) {
      // No screen has said its keys yet (the page is still loading): held, and
      // applied once a screen with that key is there, if the item is the same
      // and has been on screen long enough.
      e.preventDefault();
      e.stopImmediatePropagation();
      if (!e.repeat) {
        note(state, `held ${key} before any screen, at ${shownToken(state, null)}`);
        state.held.push({key, screen: null, token: shownToken(state, null), at: pressedAt(e)});
        flush(state);
      }
      return;
    }
    if (!id) return;
    const screen = state.screens.get(id);
    if (key in screen.focus) {
      const box = document.querySelector('.' + CSS.escape(screen.focus[key]));
      const input = box && box.querySelector('input, textarea');
      if (input && !input.disabled) {
        e.preventDefault();
        e.stopImmediatePropagation();
        input.focus();
      }
      return;
    }
    // When the key went down (the event's own time: a busy or throttled page
    // runs this handler late, and a burst's keys would seem further apart).
    const now = pressedAt(e);
    const free = screen.relative.includes(key);  // an undo: never refused for haste
    const counted = !free && !screen.nav.includes(key);  // answers, picks, marks, settlements
    if (counted && e.repeat) {
      // A key held down is one press, not one an item.
      e.preventDefault();
      e.stopImmediatePropagation();
      return;
    }
    const refused = state.refusedAt.has(id) ? state.refusedAt.get(id) : -Infinity;
    if ((counted && tooSoon(state, id, now)) || (!free && now - refused < screen.dwell)) {
      // Too soon after what it acts on was drawn, or right behind a refused key
      // (in the same burst: meant to follow it): not taken, and said.
      e.preventDefault();
      e.stopImmediatePropagation();
      refuse(state, id, null, `refused ${key} at ${shownToken(state, id)}: too soon`, now);
      return;
    }
    if (!appBusy() && !state.held.length) {  // keys wait behind those held before them
      // Streamlit's own shortcut presses the button (or nothing, without one);
      // until its run is over, the next keys wait.
      if (buttonFor(screen.buttons[key])) state.sentAt = performance.now();
      if (counted) hideNotice(state, id);
      note(state, `passed ${key} at ${shownToken(state, id)}`);
      return;
    }
    e.preventDefault();
    e.stopImmediatePropagation();
    if (!e.repeat) {
      note(state, `held ${key} at ${shownToken(state, id)}`);
      state.held.push({key, screen: id, token: shownToken(state, id), at: now});
      flush(state);
    }
  }, true);

  // A click on a button goes to the server too: keys right after it wait for its run.
  document.addEventListener('click', (e) => {
    if (e.isTrusted && e.target && e.target.closest && e.target.closest('[data-testid=stMain] button')) {
      state.sentAt = performance.now();
    }
  }, true);

  // The focus back to the page after a choice in a drop-down list.
  const release = () => setTimeout(() => {
    const a = document.activeElement;
    if (a && a.getAttribute && a.getAttribute('role') === 'combobox') a.blur();
  }, 0);
  document.addEventListener('click', (e) => {
    if (e.target && e.target.closest && e.target.closest('[role="option"]')) release();
  }, true);
  document.addEventListener('keydown', (e) => {
    const t = e.target;
    if ((e.key === 'Enter' || e.key === 'Tab') && t && t.getAttribute
        && t.getAttribute('role') === 'combobox' && t.getAttribute('aria-expanded') === 'true') {
      release();
    }
  }, true);

  // After each redraw: the judged text in view inside its box, once per screen state.
  const watch = () => {
    reveal(state);
    noteDrawn(state);
    placeNotice(state);
    if (!appBusy()) {
      for (const [id, screen] of state.screens) {
        const mark = `${id}:${screen.version}`;
        if (state.scrolled.has(mark)) continue;
        // Done once every element to keep in view is drawn (it may come a run after
        // the keys: a page load draws the item next), or after 2 s of looking.
        state.scrollTries = state.scrollTries || new Map();  // a state kept from before
        const tries = (state.scrollTries.get(mark) || 0) + 1;
        state.scrollTries.set(mark, tries);
        let missing = false;
        for (const cls of screen.scroll) {
          const el = document.querySelector('.' + CSS.escape(cls));
          if (el) visibleIn(el); else missing = true;
        }
        if (!missing || tries >= 40) {
          state.scrolled.add(mark);
          state.scrollTries.delete(mark);
        }
      }
    }
    setTimeout(watch, 50);
  };
  watch();
  return state;
}

export default function (component) {
  const {data, setStateValue} = component;
  const state = window[STATE] || install();
  if (!data || !data.id) return undefined;
  // Say this screen's keys are live (this script is running and times what the
  // screen draws): the server counts no press on the screen until then.
  if (data.gate) {
    const sent = state.gates.get(data.id) || 0;
    if (sent < 3) {
      state.gates.set(data.id, sent + 1);
      setStateValue('live', true);
    }
  } else {
    state.gates.delete(data.id);
  }
  const old = state.screens.get(data.id);
  const version = JSON.stringify([data.token, data.scroll]);
  state.screens.set(data.id, {
    buttons: data.buttons || {}, nav: data.nav || [], relative: data.relative || [],
    focus: data.focus || {}, scroll: data.scroll || [], marker: data.marker || null,
    dwell: data.dwell_ms || 0, tooSoon: data.too_soon || TOO_SOON, slot: data.slot || null,
    since: old && old.token === data.token ? old.since : performance.now(), token: data.token,
    // When the server was first seen to know these keys are live (null: not yet).
    live: data.gate ? null : (old && old.live !== null ? old.live : performance.now()),
    version: old && old.version === version ? old.version : version,
  });
  if (!(old && old.version === version)) state.scrolled.delete(`${data.id}:${version}`);
  return undefined;
}

// ---- Long texts, Space and Tab (issue 29, screens; i29-screens owns this block) ----
//
// The boxes that hold the text being judged are named in assets/carelens.css
// (`--carelens-reading`, a selector list, the first the one Space scrolls), as
// are the text boxes Tab leaves for the page (`--carelens-tab-leaves`). Then:
//
// - a reading box taller than its window shows a cue at its bottom edge
//   ("more below · Space") while there is more of it below;
// - Space scrolls the first such box on screen down by most of its height,
//   Shift+Space up: the page, and the answers beside the text, stay where they
//   are. Space stays a text box's, and a control's reached with Tab
//   (:focus-visible), whose own key it is;
// - Tab (or Shift+Tab) in such a text box keeps what was typed (the box
//   commits it as it loses the focus) and gives the focus back to the page,
//   not to the next control down it, which the browser would scroll into view;
// - when another item comes on screen (the `.st-key-at_<item>_...` markers), the
//   page is scrolled back to its top: a page scrolled for one item (a text box
//   reached by S, say) is never left scrolled for the next.
(function readingBoxes() {
  if (window.__carelensReading) return;
  const state = {cues: new Map(), item: null};
  window.__carelensReading = state;

  function listed(name) {
    const raw = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return raw.replace(/^["']|["']$/g, '');
  }

  function onScreen(el) {
    const r = el.getBoundingClientRect();
    return r.height > 0 && r.bottom > 0 && r.top < window.innerHeight && el.checkVisibility();
  }

  function boxes() {
    const sel = listed('--carelens-reading');
    if (!sel) return [];
    const found = [];
    for (const one of sel.split(',')) {
      for (const el of document.querySelectorAll('[data-testid="stMain"] ' + one.trim())) {
        if (!found.includes(el)) found.push(el);
      }
    }
    return found;
  }

  function below(box) {  // pixels of the box's text under its window
    return box.scrollHeight - box.clientHeight - box.scrollTop;
  }

  function cueFor(box) {
    let cue = state.cues.get(box);
    if (!cue) {
      cue = document.createElement('div');
      cue.className = 'carelens-more-below';
      cue.setAttribute('data-testid', 'carelensMoreBelow');
      cue.setAttribute('aria-hidden', 'true');
      cue.textContent = '▾ more below · Space';
      document.body.appendChild(cue);
      state.cues.set(box, cue);
    }
    return cue;
  }

  function spaceBox() {  // the box Space scrolls: the first on screen with more to show
    const shown = boxes().filter(b => b.clientHeight > 0 && onScreen(b));
    return shown.find(b => b.scrollHeight > b.clientHeight + 2) || shown[0] || null;
  }

  function drawCues() {
    const live = new Set(boxes());
    const spaced = spaceBox();
    for (const [box, cue] of state.cues) {
      if (!live.has(box) || !box.isConnected) {
        cue.remove();
        state.cues.delete(box);
      }
    }
    for (const box of live) {
      const more = box.clientHeight > 0 && below(box) > 4 && onScreen(box);
      const cue = more || state.cues.has(box) ? cueFor(box) : null;
      if (!cue) continue;
      cue.style.display = more ? 'block' : 'none';
      if (!more) continue;
      cue.textContent = box === spaced ? '▾ more below · Space' : '▾ more below';
      const r = box.getBoundingClientRect();
      const bottom = Math.min(r.bottom, window.innerHeight);
      cue.style.top = `${Math.round(bottom - 28)}px`;
      cue.style.right = `${Math.round(document.documentElement.clientWidth - r.right + 14)}px`;
    }
  }

  function typingIn(t) {
    if (!t || !t.tagName) return false;
    if (t.isContentEditable || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT') return true;
    return t.tagName === 'INPUT' && !['checkbox', 'radio', 'range', 'button', 'file', 'reset',
      'submit', 'color'].includes(t.type);
  }

  window.addEventListener('keydown', (e) => {
    if (e.key === 'Tab' && !e.ctrlKey && !e.altKey && !e.metaKey && typingIn(e.target)) {
      const sel = listed('--carelens-tab-leaves');
      if (sel && e.target.closest(sel)) {
        e.preventDefault();
        e.stopImmediatePropagation();
        e.target.blur();  // the box commits its text as it loses the focus
      }
      return;
    }
    if (e.key !== ' ' || e.ctrlKey || e.altKey || e.metaKey || typingIn(e.target)) return;
    const t = e.target;
    if (t && t.matches && t !== document.body && t.matches(':focus-visible')) return;
    const box = spaceBox();
    if (!box) return;  // no text to read here: Space is the page's
    e.preventDefault();
    e.stopImmediatePropagation();
    const step = Math.max(40, Math.round(box.clientHeight * 0.85));
    box.scrollBy({top: e.shiftKey ? -step : step, behavior: 'instant'});
    if (t && t.blur && t !== document.body) t.blur();  // a clicked button keeps no Space
    drawCues();
  }, true);

  function shownItem() {
    // The item a marker names: `st-key-at_<token>` or `st-key-at_<screen>__<token>`,
    // the token starting with the item's number ("12", "12_s3", "12_c0").
    const m = document.querySelector('[data-testid="stMain"] [class*="st-key-at_"]');
    if (!m) return null;
    const cls = [...m.classList].find(c => c.startsWith('st-key-at_'));
    if (!cls) return null;
    const token = cls.slice('st-key-at_'.length).split('__').pop();
    return token.split('_')[0];
  }

  function tick() {
    const item = shownItem();
    if (item !== null && item !== state.item) {
      if (state.item !== null) {
        const main = document.querySelector('[data-testid="stMain"]');
        if (main) main.scrollTop = 0;  // a new item starts at the top of the page
      }
      state.item = item;
    }
    drawCues();
  }
  document.addEventListener('scroll', drawCues, true);
  window.addEventListener('resize', drawCues);
  setInterval(tick, 100);
})();
// ---- end of the block of issue 29, screens ----
