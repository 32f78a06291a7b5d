// The approval inbox's only script: it keeps a page current without a reload. Everything works without it.
// A page's live part ([data-live]) is fetched again when the ticket's history grows (server-sent events,
// [data-events]) or every few seconds ([data-poll], the lists: visibility is not pushed).
"use strict";
(function () {
  const live = document.querySelector("[data-live]");
  if (live) {
    // A reason being typed survives the redraw: its words, and the caret if it was being typed in.
    const redraw = function (html) {
      const typed = {};
      live.querySelectorAll("textarea[name]").forEach(function (box) { typed[box.name] = box.value; });
      const focused = live.contains(document.activeElement) ? document.activeElement.name : null;
      live.innerHTML = html;
      live.querySelectorAll("textarea[name]").forEach(function (box) {
        if (typed[box.name]) { box.value = typed[box.name]; }
        if (box.name === focused) { box.focus(); box.setSelectionRange(box.value.length, box.value.length); }
      });
    };
    let busy = false;
    let again = false;
    const refresh = async function () {
      if (busy) { again = true; return; }
      busy = true;
      try {
        do {
          again = false;
          const response = await fetch(live.dataset.live, { credentials: "same-origin", cache: "no-store" });
          if (response.ok) { redraw(await response.text()); }
          // The session ended (signed out elsewhere, idle, too old): show the sign-in page, not stale buttons.
          if (response.status === 401) { window.location.reload(); return; }
        } while (again);
      } catch (error) {
        // The inbox is unreachable for a moment: the next event or poll tries again.
      } finally {
        busy = false;
      }
    };
    if (live.dataset.events) {
      const events = new EventSource(live.dataset.events);
      events.addEventListener("history", refresh);
      events.addEventListener("closed", function () { events.close(); refresh(); });
    }
    if (live.dataset.poll) {
      setInterval(refresh, Number(live.dataset.poll));
    }
  }
  // One answer per click: the buttons are disabled once the form is on its way (after the browser has read
  // which button was pressed).
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (!form.classList.contains("answer")) { return; }
    setTimeout(function () {
      form.querySelectorAll("button").forEach(function (button) { button.disabled = true; });
    }, 0);
  });
})();
