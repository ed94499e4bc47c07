// The page's glue: theme toggle, kernel cells (editor island, backend tabs, Run, Reset,
// launch fields, saved edits), and the run cards that follow their runs' progress.
// Talks to the islands only through their contracts: window.KPlayEditor, window.KPlayRoofline.
(function () {
  "use strict";

  var THEME_KEY = "kplay:theme";
  var root = document.documentElement;
  var cells = [];
  var isMac = /Mac|iPhone|iPad|iPod/.test(navigator.platform || navigator.userAgent || "");

  // ------------------------------------------------------------------ storage

  function load(key) {
    try {
      return window.localStorage.getItem(key);
    } catch (e) {
      return null;
    }
  }

  function save(key, value) {
    try {
      if (value === null) window.localStorage.removeItem(key);
      else window.localStorage.setItem(key, value);
    } catch (e) {
      // Private windows and full quotas: edits then live only as long as the page.
    }
  }

  // ------------------------------------------------------------------ theme

  function isDark() {
    return root.getAttribute("data-theme") === "dark";
  }

  function syncThemeButtons() {
    var dark = isDark();
    document.querySelectorAll("[data-theme-toggle]").forEach(function (btn) {
      btn.setAttribute("aria-pressed", dark ? "true" : "false");
      var label = btn.querySelector(".theme-toggle-label");
      if (label) label.textContent = dark ? "Light theme" : "Dark theme";
      btn.title = dark ? "Switch to the light theme" : "Switch to the dark theme";
    });
  }

  function setTheme(theme) {
    root.setAttribute("data-theme", theme);
    save(THEME_KEY, theme);
    syncThemeButtons();
    cells.forEach(function (cell) {
      cell.editor.setDark(theme === "dark");
    });
  }

  // ------------------------------------------------------------------ editor

  // A plain textarea with the editor's interface, for when the editor bundle is missing.
  function textareaEditor(parent, opts) {
    var area = document.createElement("textarea");
    area.className = "kcell-textarea";
    area.spellcheck = false;
    area.value = opts.doc;
    area.setAttribute("aria-label", opts.label || "Kernel source");
    area.rows = Math.min(30, Math.max(8, opts.doc.split("\n").length + 1));
    area.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
        ev.preventDefault();
        opts.onRun();
      }
    });
    area.addEventListener("input", function () {
      opts.onChange(area.value);
    });
    parent.appendChild(area);
    return {
      getDoc: function () { return area.value; },
      setDoc: function (text) { area.value = text; },
      setLanguage: function () {},
      markLines: function () {},
      clearMarks: function () {},
      setDark: function () {},
      focus: function () { area.focus(); },
      destroy: function () { area.remove(); },
    };
  }

  // The nonce the page's Content-Security-Policy gives this response (base.html puts it in a
  // meta tag): the editor's generated stylesheet needs it to be applied.
  function cspNonce() {
    var meta = document.querySelector('meta[name="csp-nonce"]');
    return meta ? meta.getAttribute("content") || "" : "";
  }

  function makeEditor(parent, opts) {
    if (window.KPlayEditor && typeof window.KPlayEditor.create === "function") {
      try {
        return window.KPlayEditor.create(parent, opts);
      } catch (err) {
        console.error("editor failed to start; using a plain text area", err);
      }
    }
    return textareaEditor(parent, opts);
  }

  // ------------------------------------------------------------------ cells

  function Cell(el) {
    this.el = el;
    this.id = el.getAttribute("data-cell");
    this.data = JSON.parse(el.querySelector(".kcell-data").textContent);
    this.offers = {};
    this.launchValues = {};
    this.diagnostics = {};
    var self = this;
    this.data.backends.forEach(function (offer) {
      self.offers[offer.key] = offer;
    });
    // A link may name the tab to open (?backend=numba-cuda); else the reader's last tab.
    var asked = new URLSearchParams(window.location.search).get("backend");
    var saved = asked && this.offers[asked] ? asked : load(this.tabKey());
    this.backend = saved && this.offers[saved] ? saved : this.data.backend;
    this.form = el.querySelector("[data-run-form]");
    this.slot = el.querySelector("[data-card-slot]");
    this.status = el.querySelector("[data-status]");
    this.saveTimer = null;
    var host = el.querySelector("[data-editor]");
    host.innerHTML = "";
    this.editor = makeEditor(host, {
      doc: this.docFor(this.backend),
      language: this.offers[this.backend].language,
      dark: isDark(),
      label: this.offers[this.backend].title + " source of " + this.id,
      onRun: function () { self.run(); },
      onChange: function () { self.scheduleSave(); },
      nonce: cspNonce(),
    });
    this.bind();
    this.showBackend(this.backend);
  }

  Cell.prototype.srcKey = function (backend) {
    return "kplay:src:" + this.id + ":" + backend;
  };

  Cell.prototype.tabKey = function () {
    return "kplay:tab:" + this.id;
  };

  Cell.prototype.docFor = function (backend) {
    var saved = load(this.srcKey(backend));
    return saved !== null ? saved : this.offers[backend].starter;
  };

  Cell.prototype.scheduleSave = function () {
    var self = this;
    clearTimeout(this.saveTimer);
    this.saveTimer = setTimeout(function () { self.saveNow(); }, 250);
  };

  Cell.prototype.saveNow = function () {
    clearTimeout(this.saveTimer);
    this.saveTimer = null;
    var doc = this.editor.getDoc();
    // Untouched starters are not stored, so a revised starter reaches the reader.
    save(this.srcKey(this.backend), doc === this.offers[this.backend].starter ? null : doc);
  };

  Cell.prototype.bind = function () {
    var self = this;
    this.el.querySelectorAll(".kcell-tab").forEach(function (tab) {
      tab.addEventListener("click", function () { self.select(tab.getAttribute("data-backend")); });
      tab.addEventListener("keydown", function (ev) { self.tabKeys(ev); });
    });
    this.form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      self.run();
    });
    this.el.querySelector("[data-reset]").addEventListener("click", function () { self.reset(); });
    this.el.addEventListener("click", function (ev) {
      var attempt = ev.target.closest("[data-load-run]");
      if (attempt) {
        self.loadRun(attempt.getAttribute("data-load-run"), attempt.getAttribute("data-backend"));
      }
      // "Check it in another backend" on a card: this cell's own tab when it has one,
      // else the link goes to the problem's page with that tab open.
      var other = ev.target.closest("[data-switch-backend]");
      if (other && self.offers[other.getAttribute("data-switch-backend")]) {
        ev.preventDefault();
        self.select(other.getAttribute("data-switch-backend"));
        self.el.scrollIntoView({ block: "start" });
      }
      var line = ev.target.closest("[data-goto-line]");
      if (line) self.gotoLine(parseInt(line.getAttribute("data-goto-line"), 10));
    });
    this.el.querySelectorAll("[data-mod-key]").forEach(function (k) {
      k.textContent = isMac ? "⌘" : "Ctrl";
    });
  };

  Cell.prototype.tabKeys = function (ev) {
    var keys = this.data.backends.map(function (b) { return b.key; });
    var at = keys.indexOf(this.backend);
    var next = null;
    if (ev.key === "ArrowRight") next = keys[(at + 1) % keys.length];
    else if (ev.key === "ArrowLeft") next = keys[(at - 1 + keys.length) % keys.length];
    else if (ev.key === "Home") next = keys[0];
    else if (ev.key === "End") next = keys[keys.length - 1];
    if (next === null) return;
    ev.preventDefault();
    this.select(next);
    this.el.querySelector('.kcell-tab[data-backend="' + next + '"]').focus();
  };

  Cell.prototype.stashLaunch = function () {
    var values = {};
    this.form.querySelectorAll(".launch-field input, .launch-field select").forEach(function (input) {
      values[input.name] = input.value;
    });
    this.launchValues[this.backend] = values;
  };

  Cell.prototype.select = function (backend) {
    if (!this.offers[backend] || backend === this.backend) return;
    if (this.saveTimer) this.saveNow();
    this.stashLaunch();
    this.backend = backend;
    save(this.tabKey(), backend);
    this.editor.clearMarks();
    this.editor.setLanguage(this.offers[backend].language);
    this.editor.setDoc(this.docFor(backend));
    this.showBackend(backend);
    this.markFor(backend);
  };

  // Tabs, launch fields and their placeholders for the selected backend.
  Cell.prototype.showBackend = function (backend) {
    var cid = this.id;
    this.el.querySelectorAll(".kcell-tab").forEach(function (tab) {
      var on = tab.getAttribute("data-backend") === backend;
      tab.setAttribute("aria-selected", on ? "true" : "false");
      tab.tabIndex = on ? 0 : -1;
    });
    var panel = this.el.querySelector(".kcell-panel");
    panel.setAttribute("aria-labelledby", "cell-" + cid + "-tab-" + backend);
    var launch = this.offers[backend].launch || {};
    var stash = this.launchValues[backend] || {};
    var placeholders = {
      grid: (launch.grid || []).join(", "),
      block: (launch.block || []).join(", "),
      shared_mem_bytes: launch.shared_mem_bytes || "",
      constants: Object.keys(launch.constants || {}).map(function (k) {
        return k + "=" + launch.constants[k];
      }).join(", "),
      num_warps: launch.num_warps == null ? "" : String(launch.num_warps),
      num_stages: launch.num_stages == null ? "" : String(launch.num_stages),
    };
    var shown = 0;
    this.form.querySelectorAll(".launch-field").forEach(function (field) {
      var input = field.querySelector("input, select");
      var applies = (field.getAttribute("data-launch-for") || "").split(" ").indexOf(backend) >= 0;
      field.hidden = !applies;
      input.disabled = !applies;
      if (input.tagName === "INPUT") input.placeholder = placeholders[input.name] || "";
      input.value = stash[input.name] || "";
      if (applies) shown += 1;
    });
    this.form.querySelector("[data-launch]").hidden = shown === 0;
  };

  Cell.prototype.say = function (text) {
    if (this.status) this.status.textContent = text;
  };

  Cell.prototype.run = function () {
    var self = this;
    if (this.posting) return;
    this.saveNow();
    var body = new FormData(this.form); // disabled (inapplicable) launch fields are left out
    body.set("backend", this.backend);
    body.set("source", this.editor.getDoc());
    this.editor.clearMarks();
    this.diagnostics[this.backend] = [];
    this.posting = true;
    this.el.classList.add("is-submitting");
    this.say("Sending…");
    fetch(this.el.getAttribute("data-run-url"), {
      method: "POST",
      body: body,
      headers: { "HX-Request": "true" },
      credentials: "same-origin",
    })
      .then(function (resp) { return resp.text(); })
      .then(function (html) {
        self.showCard(html);
        self.say("");
      })
      .catch(function (err) {
        self.showCard(
          '<section class="run-card tone-bad run-input-error" data-run-card data-final="true" role="alert">' +
            '<header class="run-head"><p class="verdict verdict-bad">Not sent</p></header>' +
            '<p class="run-message"></p><p class="muted">Your code is still in the editor.</p></section>'
        );
        self.slot.querySelector(".run-message").textContent =
          "Could not reach the server (" + err.message + "). Try again when it is back.";
        self.say("");
      })
      .finally(function () {
        self.posting = false;
        self.el.classList.remove("is-submitting");
      });
  };

  Cell.prototype.showCard = function (html) {
    this.slot.innerHTML = html;
    var card = this.slot.querySelector("[data-run-card]");
    if (!card) return;
    if (window.htmx) window.htmx.process(card);
    activateCard(card, true);
  };

  Cell.prototype.reset = function () {
    var starter = this.offers[this.backend].starter;
    if (this.editor.getDoc() === starter) return;
    var ok = window.confirm(
      "Replace your " + this.offers[this.backend].title + " code with the starter? Your edits are discarded."
    );
    if (!ok) return;
    this.editor.clearMarks();
    this.editor.setDoc(starter);
    save(this.srcKey(this.backend), null);
    this.editor.focus();
  };

  Cell.prototype.loadRun = function (runId, backend) {
    var self = this;
    fetch("/api/v1/runs/" + encodeURIComponent(runId), { headers: { Accept: "application/json" } })
      .then(function (resp) {
        if (!resp.ok) throw new Error("the server answered " + resp.status);
        return resp.json();
      })
      .then(function (run) {
        var target = self.offers[run.backend] ? run.backend : backend;
        if (target !== self.backend) self.select(target);
        var current = self.editor.getDoc();
        if (current !== run.source && current !== self.offers[target].starter) {
          if (!window.confirm("Replace the code in the editor with this attempt?")) return;
        }
        self.editor.clearMarks();
        self.editor.setDoc(run.source);
        self.saveNow();
        self.editor.focus();
        self.say("Loaded an earlier attempt.");
      })
      .catch(function (err) {
        self.say("Could not load that attempt: " + err.message);
      });
  };

  // A shared run forked into this cell (app/services/sharing.py): its source and launch
  // go into the reader's editor; pressing Run makes it the reader's own run.
  Cell.prototype.fork = function (run) {
    var title = this.offers[run.backend] ? this.offers[run.backend].title : run.backend;
    if (!this.offers[run.backend]) {
      this.say("This cell does not offer " + title + ": the shared run was not loaded.");
      return;
    }
    if (run.backend !== this.backend) this.select(run.backend);
    var current = this.editor.getDoc();
    if (current !== run.source && current !== this.offers[run.backend].starter &&
        !window.confirm("Replace your " + title + " code in this cell with the shared run?")) {
      this.say("Kept your code: the shared run was not loaded.");
      return;
    }
    this.editor.clearMarks();
    this.editor.setDoc(run.source);
    this.saveNow();
    this.launchValues[this.backend] = run.launch_fields || {};
    this.showBackend(this.backend);
    if (Object.keys(run.launch_fields || {}).length) this.form.querySelector("[data-launch]").open = true;
    this.el.scrollIntoView({ block: "start" });
    this.editor.focus();
    this.say("Loaded the shared run into your editor: press Run to run it as yours.");
  };

  Cell.prototype.gotoLine = function (line) {
    var view = this.editor.view;
    if (view && view.state && line >= 1) {
      var n = Math.min(line, view.state.doc.lines);
      view.dispatch({ selection: { anchor: view.state.doc.line(n).from }, scrollIntoView: true });
    }
    this.editor.focus();
  };

  Cell.prototype.markFor = function (backend) {
    var marks = (this.diagnostics[backend] || []).filter(function (d) {
      return typeof d.line === "number" && d.line > 0;
    });
    if (marks.length) this.editor.markLines(marks);
  };

  Cell.prototype.onDiagnostics = function (detail) {
    this.diagnostics[detail.backend] = detail.diagnostics || [];
    if (detail.backend === this.backend) {
      this.editor.clearMarks();
      this.markFor(detail.backend);
    }
  };

  // The card itself is not a live region (it is replaced at every step while in flight);
  // screen readers hear the verdict once, when it arrives.
  Cell.prototype.announce = function (card) {
    var node = this.el.querySelector("[data-announce]");
    var verdict = card.querySelector(".verdict");
    var first = card.querySelector(".run-headline .metric");
    if (!node || !verdict) return;
    var text = "Run finished: " + spoken(verdict);
    if (first) text += ". " + spoken(first);
    node.textContent = text;
  };

  Cell.prototype.refreshHistory = function () {
    var slot = this.el.querySelector("[data-history-slot]");
    var box = slot.querySelector("[data-history-box]");
    var wasOpen = box ? box.open : false;
    fetch(this.el.getAttribute("data-history-url"), { headers: { "HX-Request": "true" } })
      .then(function (resp) { return resp.ok ? resp.text() : null; })
      .then(function (html) {
        if (html === null) return;
        slot.innerHTML = html;
        var fresh = slot.querySelector("[data-history-box]");
        if (fresh && wasOpen) fresh.open = true;
        localTimes(slot);
      })
      .catch(function () { /* the list is a convenience; the next run refreshes it */ });
  };

  // Text as a screen reader says it: without the decorative (aria-hidden) parts.
  function spoken(el) {
    var copy = el.cloneNode(true);
    copy.querySelectorAll("[aria-hidden='true']").forEach(function (n) { n.remove(); });
    return copy.textContent.replace(/\s+/g, " ").trim();
  }

  function cellById(id) {
    for (var i = 0; i < cells.length; i += 1) if (cells[i].id === id) return cells[i];
    return null;
  }

  // ------------------------------------------------------------------ run cards

  function localTimes(scope) {
    scope.querySelectorAll("time[data-local-time]").forEach(function (t) {
      var when = new Date(t.getAttribute("datetime"));
      if (!isNaN(when.getTime())) {
        t.textContent = when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
        t.title = when.toLocaleString();
      }
    });
  }

  function readJson(card, selector) {
    var node = card.querySelector(selector);
    if (!node) return null;
    try {
      return JSON.parse(node.textContent);
    } catch (e) {
      return null;
    }
  }

  function drawRoofline(card) {
    var box = card.querySelector("[data-roofline]");
    var data = readJson(card, ".roofline-data");
    if (!box || !data) return;
    if (window.KPlayRoofline && typeof window.KPlayRoofline.render === "function") {
      window.KPlayRoofline.render(box, data);
    } else {
      box.textContent = "The roofline chart could not be drawn (its script did not load).";
    }
  }

  // ------------------------------------------------------------------ share, fork, compare

  // The answer of `url` (a fragment, an error's too) into `slot`, with its chart drawn.
  function fetchInto(slot, url, method) {
    return fetch(url, { method: method || "GET", headers: { "HX-Request": "true" }, credentials: "same-origin" })
      .then(function (resp) { return resp.text(); })
      .then(function (html) {
        slot.innerHTML = html;
        localTimes(slot);
        drawRoofline(slot);
      })
      .catch(function (err) {
        slot.textContent = "Could not reach the server (" + err.message + "). Try again when it is back.";
      });
  }

  // "Profile with Nsight Compute": the profile run's card lands under the button and
  // follows itself (htmx polling) until the profile is in.
  function onProfileClick(ev) {
    var button = ev.target.closest("[data-profile-run]");
    if (!button) return false;
    var slot = button.closest("[data-profile]").querySelector("[data-profile-slot]");
    button.disabled = true;
    fetchInto(slot, "/runs/" + encodeURIComponent(button.getAttribute("data-profile-run")) + "/profile", "POST")
      .then(function () {
        button.disabled = false;
        if (window.htmx) window.htmx.process(slot);
      });
    return true;
  }

  function onShareClick(ev) {
    if (onProfileClick(ev)) return;
    var button = ev.target.closest("[data-share-run]");
    if (button) {
      var box = button.closest("[data-share]");
      button.disabled = true;
      fetchInto(box, "/runs/" + encodeURIComponent(button.getAttribute("data-share-run")) + "/share", "POST")
        .then(function () {
          var url = box.querySelector("[data-share-url]");
          if (url) url.select();
        });
      return;
    }
    var copy = ev.target.closest("[data-copy-share]");
    if (!copy) return;
    var input = copy.parentNode.querySelector("[data-share-url]");
    input.select();
    if (!navigator.clipboard) return;
    navigator.clipboard.writeText(input.value).then(
      function () { copy.textContent = "Copied"; },
      function () { copy.textContent = "Select and copy"; }
    );
  }

  // Two ticked attempts of a cell, compared under its attempts list.
  function onCompareSubmit(ev) {
    var form = ev.target.closest && ev.target.closest("[data-compare-form]");
    if (!form) return;
    ev.preventDefault();
    var query = new URLSearchParams(new FormData(form)).toString();
    fetchInto(form.querySelector("[data-compare-slot]"), form.getAttribute("action") + "?" + query);
  }

  // ?fork=<token> on a cell's page: the shared run goes into its cell's editor, once.
  function forkFromAddress() {
    var params = new URLSearchParams(window.location.search);
    var token = params.get("fork");
    if (!token) return;
    params.delete("fork");
    var rest = params.toString();
    window.history.replaceState(null, "", window.location.pathname + (rest ? "?" + rest : "") + window.location.hash);
    var target = cellById(window.location.hash.replace(/^#cell-/, "")) || cells[0];
    fetch("/api/v1/shared/" + encodeURIComponent(token), { headers: { Accept: "application/json" } })
      .then(function (resp) {
        return resp.json().then(function (body) {
          if (!resp.ok) throw new Error(body.detail || "the server answered " + resp.status);
          return body;
        });
      })
      .then(function (run) {
        // The run's own cell, else one of the same problem that offers its language (a
        // problem's page shows a chapter's cell once the book embeds the problem).
        var cell = cellById(run.cell || "") || cells.filter(function (c) {
          return c.data.problem === run.problem && c.offers[run.backend];
        })[0];
        if (!cell) throw new Error("this page has no cell for " + run.problem_title);
        cell.fork(run);
      })
      .catch(function (err) {
        if (target) target.say("Could not load the shared run: " + err.message);
      });
  }

  // ------------------------------------------------------------------ live progress

  // A card in flight follows its run's event stream (app/routers/live.py): each message
  // carries the card's next render, swapped in as it arrives. While the stream is open the
  // card's own poll (htmx, every 500 ms) is held back; where EventSource is missing, or
  // while the stream is down (it reconnects by itself, with Last-Event-ID), the poll runs.
  var streams = {};
  var MAX_STREAMS = 4;
  // The timing bar: when (page clock) each run reached `timing`, and the largest share
  // shown so far, so that no later render can move the bar back.
  var timingSince = {};
  var barShown = {};
  var drawing = false;

  function follow(card) {
    var id = card.getAttribute("data-run-id");
    var url = card.getAttribute("data-events-url");
    if (!window.EventSource || !url || streams[id]) return;
    // A browser opens about six connections to one server: leave room for the rest of the
    // page. A card over the limit polls, and takes a stream at its next render if one is free.
    if (Object.keys(streams).length >= MAX_STREAMS) return;
    var source = new EventSource(url);
    source.kplayOpening = performance.now();
    source.addEventListener("open", function () { source.kplayOpening = null; });
    streams[id] = source;
    source.addEventListener("card", function (ev) {
      var msg;
      try {
        msg = JSON.parse(ev.data);
      } catch (e) {
        return;
      }
      showStreamed(id, msg);
    });
    source.addEventListener("error", function () {
      // Closed for good (the server refused the stream): the poll takes over.
      if (source.readyState === 2) stopFollowing(id);
    });
  }

  function stopFollowing(id) {
    if (streams[id]) streams[id].close();
    delete streams[id];
  }

  // Open, or still opening for the first time (the poll waits up to two seconds for that);
  // while a dropped stream reconnects, the poll runs.
  function streaming(id) {
    var source = streams[id];
    if (!source) return false;
    if (source.readyState === 1) return true;
    return source.readyState === 0 && source.kplayOpening !== null &&
      performance.now() - source.kplayOpening < 2000;
  }

  function showStreamed(id, msg) {
    var current = document.getElementById("run-" + id);
    if (!current) {
      stopFollowing(id); // a newer run's card took its place
      return;
    }
    if (msg.final) {
      stopFollowing(id);
      fillBar(current);
    }
    var holder = document.createElement("div");
    holder.innerHTML = msg.html;
    var card = holder.querySelector("[data-run-card]");
    if (!card) return;
    card.setAttribute("data-via", "stream");
    if (typeof msg.at === "number") card.setAttribute("data-changed-at", String(msg.at));
    current.replaceWith(card);
    if (window.htmx) window.htmx.process(card);
    activateCard(card, true);
  }

  function trackBar(card) {
    var bar = card.querySelector("[data-timing-bar]");
    if (!bar) return;
    var id = card.getAttribute("data-run-id");
    // The server says how long ago the run reached `timing`; the earliest start wins.
    var since = performance.now() - (parseFloat(bar.getAttribute("data-age-s")) || 0) * 1000;
    if (!(id in timingSince) || since < timingSince[id]) timingSince[id] = since;
    setBar(bar, id, (performance.now() - timingSince[id]) / (barCap(bar) * 1000));
    if (!drawing) {
      drawing = true;
      window.requestAnimationFrame(drawBars);
    }
  }

  function barCap(bar) {
    return parseFloat(bar.getAttribute("data-cap-s")) || 0;
  }

  function drawBars() {
    var bars = document.querySelectorAll("[data-run-card] [data-timing-bar]");
    bars.forEach(function (bar) {
      var id = bar.closest("[data-run-card]").getAttribute("data-run-id");
      if (id in timingSince) setBar(bar, id, (performance.now() - timingSince[id]) / (barCap(bar) * 1000));
    });
    if (bars.length) window.requestAnimationFrame(drawBars);
    else drawing = false;
  }

  // The share of the timing budget passed: the timer stops repeating at the cap, and the
  // bar is full when the verdict comes (RunCard.timing_percent on the server says more).
  function setBar(bar, id, fraction) {
    if (!(fraction >= 0)) return;
    var f = Math.max(barShown[id] || 0, Math.min(1, fraction));
    barShown[id] = f;
    var fill = bar.querySelector("span");
    if (fill) fill.style.transform = "scaleX(" + f.toFixed(4) + ")";
    var pct = String(Math.round(f * 100));
    if (bar.getAttribute("aria-valuenow") === pct) return;
    var cap = barCap(bar);
    bar.setAttribute("aria-valuenow", pct);
    bar.setAttribute(
      "aria-valuetext",
      f >= 1
        ? "timing budget of " + cap + " s used"
        : (f * cap).toFixed(2) + " s of the " + cap + " s timing budget"
    );
  }

  function fillBar(card) {
    var bar = card.querySelector("[data-timing-bar]");
    if (bar) setBar(bar, card.getAttribute("data-run-id"), 1);
  }

  // ------------------------------------------------------------------ activation

  // A card shown for the first time: times in local time; one in flight follows its run;
  // a final one also draws its chart, hands its compiler messages to the editor and (when
  // it just finished) refreshes history.
  function activateCard(card, fresh) {
    localTimes(card);
    if (card.getAttribute("data-final") !== "true") {
      follow(card);
      trackBar(card);
      return;
    }
    if (card.hasAttribute("data-activated")) return;
    card.setAttribute("data-activated", "");
    drawRoofline(card);
    var diag = readJson(card, ".run-diagnostics");
    if (diag && diag.cell) {
      document.dispatchEvent(new CustomEvent("kplay:diagnostics", { detail: diag }));
    }
    var cell = cellById(card.getAttribute("data-cell") || "");
    if (cell && fresh) cell.announce(card);
    if (cell && fresh && !card.hasAttribute("data-input-error")) cell.refreshHistory();
  }

  function activateWithin(scope, fresh) {
    if (scope.matches && scope.matches("[data-run-card]")) activateCard(scope, fresh);
    else scope.querySelectorAll("[data-run-card]").forEach(function (c) { activateCard(c, fresh); });
  }

  function wireHtmx() {
    if (!window.htmx) return;
    window.htmx.onLoad(function (elt) {
      if (elt !== document.body) activateWithin(elt, true);
    });
    // The card's poll waits while its event stream is open.
    document.body.addEventListener("htmx:beforeRequest", function (ev) {
      var elt = ev.detail && ev.detail.elt;
      if (elt && elt.matches && elt.matches("[data-run-card]") && streaming(elt.getAttribute("data-run-id"))) {
        ev.preventDefault();
      }
    });
    // A poll answered with an error (the run vanished): show that answer, stop polling.
    document.body.addEventListener("htmx:responseError", function (ev) {
      var elt = ev.detail && ev.detail.elt;
      if (!elt || !elt.matches || !elt.matches("[data-run-card]")) return;
      var holder = document.createElement("div");
      holder.innerHTML = ev.detail.xhr.responseText;
      var card = holder.querySelector("[data-run-card]");
      if (card) {
        elt.replaceWith(card);
        activateCard(card, true);
      }
    });
    // The server may be restarting: keep polling, and say so.
    document.body.addEventListener("htmx:sendError", function (ev) {
      var elt = ev.detail && ev.detail.elt;
      var detail = elt && elt.querySelector && elt.querySelector(".run-detail");
      if (detail) detail.textContent = "Lost contact with the server; still trying…";
    });
  }

  // ------------------------------------------------------------------ start

  function start() {
    syncThemeButtons();
    document.querySelectorAll("[data-theme-toggle]").forEach(function (btn) {
      btn.addEventListener("click", function () { setTheme(isDark() ? "light" : "dark"); });
    });
    document.querySelectorAll(".kcell").forEach(function (el) {
      try {
        cells.push(new Cell(el));
      } catch (err) {
        console.error("kernel cell " + el.getAttribute("data-cell") + " failed to start", err);
      }
    });
    document.addEventListener("kplay:diagnostics", function (ev) {
      var cell = cellById(ev.detail.cell);
      if (cell) cell.onDiagnostics(ev.detail);
    });
    window.addEventListener("pagehide", function () {
      cells.forEach(function (cell) { if (cell.saveTimer) cell.saveNow(); });
    });
    activateWithin(document, false);
    wireHtmx();
    document.addEventListener("click", onShareClick);
    document.addEventListener("submit", onCompareSubmit);
    forkFromAddress();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
