/* Exercise kinds beyond "correct and fast" (app/services/exercisekinds.py).
 *
 * Fix and predict cells: the panel under the editor ([data-exercise-slot]) is reloaded from
 * the server whenever the cell's run card changes (a new run, then its final verdict), so it
 * shows "fixed" or the prediction against the measurement. The prediction itself travels in
 * the Run form (playground.js sends every field), and the server stores it before the run.
 * Profile cells: "Check answers" posts the answers; the server grades them and answers with
 * the panel. Nothing here knows an answer.
 */
(function () {
  "use strict";
  if (window.kplayExerciseKinds) return; // the script is included once per exercise cell
  window.kplayExerciseKinds = true;

  function fetchHtml(url, options) {
    var opts = options || {};
    opts.headers = { "HX-Request": "true" };
    opts.credentials = "same-origin";
    return fetch(url, opts).then(function (resp) { return resp.text(); });
  }

  function reload(slot) {
    return fetchHtml(slot.getAttribute("data-exercise-url")).then(function (html) {
      slot.innerHTML = html;
    });
  }

  function cardKey(cell) {
    var card = cell.querySelector("[data-card-slot] [data-run-card]");
    if (!card) return "";
    return (card.getAttribute("data-run-id") || "error") + ":" + card.getAttribute("data-final");
  }

  function followCards(cell, slot) {
    var cards = cell.querySelector("[data-card-slot]");
    if (!cards) return;
    var last = cardKey(cell);
    var observer = new MutationObserver(function () {
      var key = cardKey(cell);
      if (key === last) return;
      last = key;
      // An input error (nothing stored, no run) leaves the panel as it was.
      if (key.indexOf("error:") === 0) return;
      reload(slot);
    });
    observer.observe(cards, {
      childList: true,
      subtree: true,
      attributes: true,
      attributeFilter: ["data-final", "data-run-id"],
    });
  }

  function bindAnswers(form, slot) {
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var button = form.querySelector("[data-check-answers]");
      button.disabled = true;
      fetchHtml(form.getAttribute("data-answers-url"), { method: "POST", body: new FormData(form) })
        .then(function (html) { slot.innerHTML = html; })
        .catch(function (err) {
          slot.textContent = "Could not reach the server (" + err.message + "). Try again.";
        })
        .finally(function () { button.disabled = false; });
    });
  }

  function init() {
    document.querySelectorAll(".kcell [data-exercise]").forEach(function (intro) {
      var cell = intro.closest(".kcell");
      var slot = cell.querySelector("[data-exercise-slot]");
      if (!slot) return;
      var kind = intro.getAttribute("data-exercise");
      if (kind === "profile") {
        var form = intro.querySelector("[data-answers-form]");
        if (form) bindAnswers(form, slot);
      } else {
        followCards(cell, slot);
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
