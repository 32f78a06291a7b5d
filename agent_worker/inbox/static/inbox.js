// The approval inbox's only script: it keeps a page current without a reload. Everything works without it.
// A page's live part ([data-live]) is fetched again every few seconds ([data-poll] milliseconds) while the tab is
// shown, and at once when it is shown again; a hidden tab asks nothing. A ticket's page says the version it was
// drawn at ([data-version], an ETag): the inbox answers 304, with no body, until the ticket changes. Short
// requests, never a held connection, so any number of tabs share a browser's few connections to the inbox.
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
    let version = live.dataset.version || "";
    let busy = false;
    const refresh = async function () {
      if (busy || document.hidden) { return; }
      busy = true;
      try {
        const headers = version ? { "If-None-Match": version } : {};
        const response = await fetch(live.dataset.live, { credentials: "same-origin", cache: "no-store", headers: headers });
        if (response.status === 200) {
          version = response.headers.get("ETag") || "";
          redraw(await response.text());
        }
        // The session ended (signed out elsewhere, idle, too old): show the sign-in page, not stale buttons.
        if (response.status === 401) { window.location.reload(); }
      } catch (error) {
        // The inbox is unreachable for a moment: the next poll tries again.
      } finally {
        busy = false;
      }
    };
    setInterval(refresh, Number(live.dataset.poll || 4000));
    document.addEventListener("visibilitychange", refresh);
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
