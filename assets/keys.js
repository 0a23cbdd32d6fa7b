// carelens: keys that never go astray (pages/_keys.py mounts this).
//
// Loads nothing from anywhere; touches no text from the data (what it shows
// is its own fixed words, set as textContent). One listener for the whole
// page, installed once, whatever the number of mounts:
//
// - after a choice in a drop-down list, the focus goes back to the page, so
//   the next key is a shortcut, not a letter typed into the list;
// - a screen's shortcut pressed while the screen is being redrawn (the
//   script running, or elements still loading) is held, not sent to a button
//   that is about to go: once the screen is still, it is applied if the
//   screen shows what it showed when the key was pressed (the same item, the
//   same step or criterion, from the `.st-key-at_<token>` marker), or if it
//   is a relative move (Left, Right, Up, Down: "one more"); otherwise it is
//   refused, and a notice says so;
// - a key that puts the focus in a box (S: the reason for a skip);
// - scrolling the judged text into view inside its scrolling box;
// - a rerun when a reveal falls due (`due_in`, seconds).

const STATE = '__carelensKeys';

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
  if (document.querySelector('.st-key-keys_waiting')) return true;  // its item comes next
  const state = window[STATE];
  if (state && state.sentAt !== null) {
    const now = performance.now();
    // Over once a run that started after the press has ended (a run already on
    // when it was sent is another press's).
    if (state.endedStart >= state.sentAt || now - state.sentAt > (state.started >= state.sentAt
                                                                   ? 30000 : 1500)) {
      state.sentAt = null;
    } else {
      return true;
    }
  }
  return !!document.querySelector('[data-testid*="Skeleton"]');
}

function watchRuns(state) {
  // When runs start and end: a press is over once a run after it has ended.
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app) {
    setTimeout(() => watchRuns(state), 20);
    return;
  }
  let was = app.dataset.testScriptState;
  new MutationObserver(() => {
    const now = app.dataset.testScriptState;
    if (now === was) return;
    if (now === 'running') state.started = performance.now();
    if (was === 'running' && now !== 'running') state.endedStart = state.started;
    was = now;
  }).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}

function shownToken() {
  // What the screen shows: its markers' tokens (the item; the step; the
  // criterion), as they are on screen now. During a redraw a marker not yet
  // redrawn still says what the clinician is looking at.
  const tokens = [...document.querySelectorAll('[class*="st-key-at_"]')]
    .map(m => [...m.classList].find(k => k.startsWith('st-key-at_')))
    .filter(Boolean).map(c => c.slice('st-key-at_'.length));
  return tokens.length ? [...new Set(tokens)].sort().join('|') : null;
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

function notice(state, words) {
  let box = document.getElementById('carelens-key-notice');
  if (!box) {
    box = document.createElement('div');
    box.id = 'carelens-key-notice';
    box.setAttribute('role', 'status');
    box.setAttribute('data-testid', 'carelensKeyNotice');
    document.body.appendChild(box);
  }
  box.textContent = words;
  box.style.display = 'block';
  clearTimeout(state.noticeTimer);
  state.noticeTimer = setTimeout(() => { box.style.display = 'none'; }, 5000);
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

function label(key) {
  return key.replace('left', '←').replace('right', '→').replace('up', '↑')
    .replace('down', '↓').replace('shift+', 'Shift+').toUpperCase().replace('SHIFT+', 'Shift+');
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
  const entry = state.held.shift();
  const screen = entry.screen === null ? state.screens.get(screenFor(state, entry.key))
    : state.screens.get(entry.screen);
  const token = shownToken();
  const same = entry.token !== null && entry.token === token;
  if (screen && (same || (screen.nav.includes(entry.key) && entry.token !== null))) {
    const button = buttonFor(screen.buttons[entry.key]);
    if (button) {
      state.stillSince = null;
      state.sentAt = performance.now();
      note(state, `applied ${entry.key} at ${token}`);
      button.click();
    } else {
      note(state, `no button for ${entry.key}`);
    }
  } else {
    // Refused, and so are the keys typed after it: they were meant to follow it
    // (Y N Y: once the N is refused, the second Y would land on N's criterion).
    const also = state.held.length;
    state.held = [];
    state.refusedAt = performance.now();
    note(state, `refused ${entry.key} pressed at ${entry.token}, now ${token}`);
    notice(state, `Your ${label(entry.key)} was not applied`
      + (also ? `, nor the ${also === 1 ? 'key' : `${also} keys`} after it` : '')
      + ': it came while the screen was changing. Check what is on screen now, then press again.');
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
                 noticeTimer: null, scrolled: new Set(), scrollTries: new Map(), sentAt: null, started: -1, endedStart: -1,
                 refusedAt: -1e9, log: [], due: new Map(), gates: new Map()};
  window[STATE] = state;
  watchRuns(state);

  window.addEventListener('keydown', (e) => {
    if (e.__carelensReplay || typing(e.target)) return;
    const key = canonical(e);
    if (!screenFor(state, key) && appBusy() && /^(shift\+)?[0-9a-z]$|^(left|right|up|down)$|^ctrl\+enter$/.test(key)) {
      // No screen has said its keys yet (the page is still loading): held, and
      // applied once a screen with that key is there, if the item is the same.
      e.preventDefault();
      e.stopImmediatePropagation();
      if (!e.repeat) {
        note(state, `held ${key} before any screen, at ${shownToken()}`);
        state.held.push({key, screen: null, token: shownToken(), at: performance.now()});
        flush(state);
      }
      return;
    }
    for (const [id, screen] of state.screens) {
      if (!document.querySelector('.st-key-' + CSS.escape(id))) continue;  // not mounted
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
      if (!(key in screen.buttons)) continue;
      if (performance.now() - state.refusedAt < 1000) {
        // Typed right behind a refused key, in the same burst: meant to follow it.
        e.preventDefault();
        e.stopImmediatePropagation();
        state.refusedAt = performance.now();
        note(state, `refused ${key}, right behind a refused key`);
        return;
      }
      if (!appBusy() && !state.held.length) {  // keys wait behind those held before them
        // Streamlit's own shortcut presses the button (or nothing, without one);
        // until its run is over, the next keys wait.
        if (buttonFor(screen.buttons[key])) state.sentAt = performance.now();
        note(state, `passed ${key} at ${shownToken()}`);
        return;
      }
      e.preventDefault();
      e.stopImmediatePropagation();
      if (!e.repeat) {
        note(state, `held ${key} at ${shownToken()}`);
        state.held.push({key, screen: id, token: shownToken(), at: performance.now()});
        flush(state);
      }
      return;
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
  const {data, setTriggerValue, setStateValue} = component;
  const state = window[STATE] || install();
  if (!data || !data.id) return undefined;
  // A screen that shows its item only once its keys are live (a key pressed as
  // soon as the item is in view is then never lost): say they are.
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
    buttons: data.buttons || {}, nav: data.nav || [], focus: data.focus || {},
    scroll: data.scroll || [], version: old && old.version === version ? old.version : version,
  });
  if (!(old && old.version === version)) state.scrolled.delete(`${data.id}:${version}`);
  // One timer a screen: Streamlit calls this again on new data without the
  // cleanup of the last call, so the last timer is cleared here.
  clearTimeout(state.due.get(data.id));
  state.due.delete(data.id);
  if (data.due_in > 0) {
    state.due.set(data.id, setTimeout(() => {
      state.due.delete(data.id);
      setTriggerValue('due', Date.now());
    }, data.due_in * 1000 + 100));
  }
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
