// querator dashboard: live pages. The page's body names an event stream
// (data-live); each event makes the live part of the page re-read itself
// (hx-trigger="qr-change from:body"). "ready" comes once the server watches
// the store, so a change between the page's render and the stream is not missed.
// Once a form is sent the page stops: the answer replaces it, and a refresh
// meanwhile would show the outcome on a page whose ticks and clicks are lost.
(function () {
  "use strict";
  var source = null;
  function live() {
    var url = document.body.dataset.live;
    if (!url || !window.EventSource) { return; }
    source = new EventSource(url);
    var refresh = function () { htmx.trigger(document.body, "qr-change"); };
    source.addEventListener("ready", refresh);
    source.addEventListener("change", refresh);
    document.body.dataset.liveState = "connecting";
    source.addEventListener("ready", function () { document.body.dataset.liveState = "open"; });
  }
  // A plain form sent (htmx's own forms prevent the default and stay live).
  function leaving(event) {
    if (event.defaultPrevented || !source) { return; }
    source.close();
    source = null;
    document.querySelectorAll("[hx-get]").forEach(function (part) { htmx.trigger(part, "htmx:abort"); });
    document.body.dataset.liveState = "closed";
  }
  // A button with data-confirm submits its form only once the person agrees
  // (htmx's hx-confirm covers the buttons htmx sends; these are plain submits).
  function confirmed(event) {
    var button = event.target.closest("button[data-confirm]");
    if (button && !window.confirm(button.dataset.confirm)) { event.preventDefault(); }
  }
  document.addEventListener("DOMContentLoaded", live);
  document.addEventListener("click", confirmed);
  document.addEventListener("submit", leaving);
})();
