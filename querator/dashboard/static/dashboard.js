// querator dashboard: live pages. The page's body names an event stream
// (data-live); each event makes the live part of the page re-read itself
// (hx-trigger="qr-change from:body"). "ready" comes once the server watches
// the store, so a change between the page's render and the stream is not missed.
(function () {
  "use strict";
  function live() {
    var url = document.body.dataset.live;
    if (!url || !window.EventSource) { return; }
    var source = new EventSource(url);
    var refresh = function () { htmx.trigger(document.body, "qr-change"); };
    source.addEventListener("ready", refresh);
    source.addEventListener("change", refresh);
    document.body.dataset.liveState = "connecting";
    source.addEventListener("ready", function () { document.body.dataset.liveState = "open"; });
  }
  document.addEventListener("DOMContentLoaded", live);
})();
