// Loaded (not deferred) before any stylesheet, so a dark reader never sees a light flash.
// A file of its own rather than an inline script: the Content-Security-Policy allows only
// this server's own script files.
(function () {
  var t = null;
  try { t = localStorage.getItem("kplay:theme"); } catch (e) {}
  if (t !== "light" && t !== "dark") {
    t = window.matchMedia && matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  document.documentElement.setAttribute("data-theme", t);
})();
