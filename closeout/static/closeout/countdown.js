// The schedule page's countdown: the server renders the reset time; this turns it into
// "in 3 h 12 min 5 s" every second, and reloads the page once it has passed (the next season
// is then the current one). Without JavaScript the time itself stays.
(function () {
  "use strict";
  var node = document.getElementById("countdown");
  if (!node) return;
  var at = Date.parse(node.getAttribute("datetime"));
  if (isNaN(at)) return;
  // Counted on the server's clock (its time when it rendered the page), not the reader's: a
  // clock a few minutes fast found the reset passed at every load and reloaded in a loop.
  var served = Date.parse(node.getAttribute("data-now"));
  var skew = isNaN(served) ? 0 : served - Date.now();
  var label = node.textContent;
  var counted = false;  // the reset was still ahead at some tick of this page
  function pad(n) { return n < 10 ? "0" + n : String(n); }
  function tick() {
    var left = Math.round((at - (Date.now() + skew)) / 1000);
    if (left <= 0) {
      node.textContent = label + " (now)";
      // Once: a page rendered after the reset (the next season not created yet) stays.
      if (counted) { window.setTimeout(function () { window.location.reload(); }, 5000); }
      return;
    }
    counted = true;
    var d = Math.floor(left / 86400), h = Math.floor(left % 86400 / 3600);
    var m = Math.floor(left % 3600 / 60), s = left % 60;
    node.textContent = label + " (in " + (d ? d + " d " : "") + h + " h " + pad(m) + " min " + pad(s) + " s)";
    window.setTimeout(tick, 1000);
  }
  tick();
})();
