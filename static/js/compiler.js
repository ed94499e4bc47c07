// The compiler panel of a run card (templates/fragments/compiler.html): fetched from
// /runs/{id}/compiler the first time its <details> opens, then wired so that a line of
// the learner's source marks the listing rows it became, a listing row marks its source
// line, and a feature badge marks the SASS instructions that earned it.
(function () {
  "use strict";

  // ------------------------------------------------------------------ loading

  function load(panel) {
    if (panel.hasAttribute("data-loaded") || panel.hasAttribute("data-loading")) return;
    var slot = panel.querySelector("[data-compiler-slot]");
    var url = panel.getAttribute("data-url");
    if (!slot || !url) return;
    panel.setAttribute("data-loading", "");
    slot.setAttribute("aria-busy", "true");
    slot.innerHTML = '<p class="muted">Loading the listings…</p>';
    fetch(url, { headers: { Accept: "text/html" }, credentials: "same-origin" })
      .then(function (resp) { return resp.text(); })
      .then(function (html) {
        slot.innerHTML = html;
        panel.setAttribute("data-loaded", "");
        var view = slot.querySelector("[data-compiler]");
        if (view) wire(view);
      })
      .catch(function () {
        slot.innerHTML = '<p class="compiler-none">The compiler view could not be loaded; close and open it to try again.</p>';
      })
      .finally(function () {
        panel.removeAttribute("data-loading");
        slot.removeAttribute("aria-busy");
      });
  }

  // ------------------------------------------------------------------ marking

  function listingOf(view) {
    return view.querySelector(".asm-listing:not([hidden])");
  }

  function clear(view, cls) {
    view.querySelectorAll("." + cls).forEach(function (el) { el.classList.remove(cls); });
  }

  function scrollInto(box, row) {
    if (!box || !row) return;
    var top = row.offsetTop - box.offsetTop;
    if (top < box.scrollTop || top > box.scrollTop + box.clientHeight - row.offsetHeight) {
      box.scrollTop = Math.max(0, top - box.clientHeight / 3);
    }
  }

  // Mark line `line` of the source and its rows in the open listing; `pin` keeps the
  // marks when the pointer leaves (a click), otherwise they preview (a hover).
  function markLine(view, line, pin) {
    var cls = pin ? "is-pinned" : "is-hover";
    clear(view, cls);
    clear(view, pin ? "is-via-pinned" : "is-via-hover");
    if (pin) view.setAttribute("data-pinned", String(line));
    var src = view.querySelector('.src-row[data-line="' + line + '"]');
    if (src) src.classList.add(cls);
    var listing = listingOf(view);
    if (!listing) return 0;
    var hits = listing.querySelectorAll('.asm-row[data-line="' + line + '"]');
    hits.forEach(function (row) { row.classList.add(cls); });
    listing.querySelectorAll(".asm-row[data-via]").forEach(function (row) {
      if (row.getAttribute("data-via").split(" ").indexOf(String(line)) >= 0) {
        row.classList.add(pin ? "is-via-pinned" : "is-via-hover");
      }
    });
    if (hits.length) scrollInto(listing, hits[0]);
    var status = view.querySelector("[data-compiler-status]");
    if (status && pin) {
      status.textContent = hits.length
        ? "Line " + line + ": " + hits.length + " row" + (hits.length === 1 ? "" : "s") + " marked"
        : "Line " + line + " has no rows in this listing";
    }
    return hits.length;
  }

  function markFeature(view, button) {
    var key = button.getAttribute("data-feature");
    var on = button.getAttribute("aria-pressed") !== "true";
    view.querySelectorAll(".cbadge[aria-pressed='true']").forEach(function (b) {
      b.setAttribute("aria-pressed", "false");
    });
    clear(view, "is-feature");
    if (!on) return;
    button.setAttribute("aria-pressed", "true");
    showListing(view, "sass");
    var rows = view.querySelectorAll('.asm-listing[data-listing="sass"] .asm-row[data-feature="' + key + '"]');
    rows.forEach(function (row) { row.classList.add("is-feature"); });
    if (rows.length) scrollInto(listingOf(view), rows[0]);
  }

  // Source lines with no row in the open listing are dimmed: nothing came of them there.
  function shade(view) {
    var listing = listingOf(view);
    var lines = {};
    if (listing) {
      listing.querySelectorAll(".asm-row[data-line]").forEach(function (row) {
        lines[row.getAttribute("data-line")] = true;
      });
    }
    view.querySelectorAll(".src-row").forEach(function (src) {
      src.classList.toggle("has-code", !!lines[src.getAttribute("data-line")]);
    });
  }

  function showListing(view, key) {
    var found = false;
    view.querySelectorAll(".compiler-tab").forEach(function (tab) {
      var on = tab.getAttribute("data-listing") === key;
      found = found || on;
      tab.setAttribute("aria-selected", on ? "true" : "false");
      tab.tabIndex = on ? 0 : -1;
    });
    if (!found) return;
    view.querySelectorAll(".asm-listing, [data-unmapped]").forEach(function (el) {
      var k = el.getAttribute("data-listing") || el.getAttribute("data-unmapped");
      el.hidden = k !== key;
    });
    shade(view);
    var pinned = view.getAttribute("data-pinned");
    if (pinned) markLine(view, pinned, true);
  }

  // ------------------------------------------------------------------ events

  function wire(view) {
    shade(view);
    var status = document.createElement("p");
    status.className = "visually-hidden";
    status.setAttribute("data-compiler-status", "");
    status.setAttribute("aria-live", "polite");
    view.appendChild(status);

    view.addEventListener("click", function (ev) {
      var tab = ev.target.closest(".compiler-tab");
      if (tab) return showListing(view, tab.getAttribute("data-listing"));
      var badge = ev.target.closest(".cbadge");
      if (badge) return markFeature(view, badge);
      var src = ev.target.closest(".src-row");
      if (src) return markLine(view, src.getAttribute("data-line"), true);
      var row = ev.target.closest(".asm-row[data-line]");
      if (row) {
        markLine(view, row.getAttribute("data-line"), true);
        var line = view.querySelector('.src-row[data-line="' + row.getAttribute("data-line") + '"]');
        scrollInto(view.querySelector(".compiler-source"), line);
      }
    });
    view.addEventListener("mouseover", function (ev) {
      var src = ev.target.closest(".src-row");
      if (src) {
        markLine(view, src.getAttribute("data-line"), false);
      } else if (!ev.target.closest(".compiler-source")) {
        clear(view, "is-hover");
        clear(view, "is-via-hover");
      }
    });
    view.addEventListener("mouseleave", function () {
      clear(view, "is-hover");
      clear(view, "is-via-hover");
    });
    view.addEventListener("keydown", function (ev) {
      var src = ev.target.closest(".src-row");
      if (src && (ev.key === "Enter" || ev.key === " ")) {
        ev.preventDefault();
        markLine(view, src.getAttribute("data-line"), true);
        return;
      }
      if (src && (ev.key === "ArrowDown" || ev.key === "ArrowUp")) {
        var next = ev.key === "ArrowDown" ? src.nextElementSibling : src.previousElementSibling;
        if (next) {
          ev.preventDefault();
          next.focus();
          markLine(view, next.getAttribute("data-line"), true);
        }
        return;
      }
      var tab = ev.target.closest(".compiler-tab");
      if (tab && (ev.key === "ArrowRight" || ev.key === "ArrowLeft")) {
        var tabs = Array.prototype.slice.call(view.querySelectorAll(".compiler-tab"));
        var at = tabs.indexOf(tab) + (ev.key === "ArrowRight" ? 1 : -1);
        var to = tabs[(at + tabs.length) % tabs.length];
        to.focus();
        showListing(view, to.getAttribute("data-listing"));
      }
    });
  }

  // <details> does not bubble its toggle event; a capturing listener still hears it, for
  // cards that arrive later (a new run, a poll, the event stream) as well.
  document.addEventListener(
    "toggle",
    function (ev) {
      var panel = ev.target;
      if (panel && panel.matches && panel.matches("details[data-compiler-panel]") && panel.open) {
        load(panel);
      }
    },
    true
  );

  window.KPlayCompiler = { load: load, wire: wire };
})();
