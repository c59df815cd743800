// The handoff console's one script. Pages work without it; it only
// (1) shows each <time> in the viewer's own zone, keeping the absolute UTC
//     time in the title (shown on hover), and
// (2) refreshes a live page: when <main id="content" data-live="URL"> is
//     present it listens to that Server-Sent Events URL and, on an event
//     named "changed", fetches this page again and swaps in its #content.
// No framework, no build step; served from the console itself (CSP
// script-src 'self').
"use strict";

(function () {
  var format;
  try {
    // dateStyle/timeStyle cannot be combined with timeZoneName: the
    // fields are named one by one.
    format = new Intl.DateTimeFormat(undefined, {
      year: "numeric",
      month: "short",
      day: "numeric",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      timeZoneName: "short",
    });
  } catch (e) {
    format = null;
  }

  function localTimes(root) {
    if (!format) {
      return;
    }
    var times = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < times.length; i++) {
      var at = new Date(times[i].getAttribute("datetime"));
      if (!isNaN(at.getTime())) {
        times[i].textContent = format.format(at);
      }
    }
  }

  function status(text) {
    var el = document.getElementById("live-status");
    if (el) {
      el.textContent = text;
    }
  }

  // Whether the person is typing or choosing in the part that would be
  // replaced: then the refresh waits until they leave it.
  function busy(content) {
    var active = document.activeElement;
    return (
      active &&
      content.contains(active) &&
      /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName)
    );
  }

  function live(content, url) {
    var inFlight = false;
    var again = false;

    function refresh() {
      if (busy(content)) {
        content.addEventListener("focusout", refreshSoon, { once: true });
        return;
      }
      if (inFlight) {
        again = true;
        return;
      }
      inFlight = true;
      fetch(location.href, {
        credentials: "same-origin",
        headers: { Accept: "text/html" },
      })
        .then(function (response) {
          return response.text();
        })
        .then(function (html) {
          var page = new DOMParser().parseFromString(html, "text/html");
          var fresh = page.getElementById("content");
          if (!fresh) {
            return;
          }
          var nodes = [];
          for (var n = fresh.firstChild; n; n = n.nextSibling) {
            nodes.push(document.adoptNode(n.cloneNode(true)));
          }
          content.replaceChildren.apply(content, nodes);
          localTimes(content);
          status("Updated at " + new Date().toLocaleTimeString() + ".");
        })
        .catch(function () {
          status("Could not refresh; reload the page to see changes.");
        })
        .finally(function () {
          inFlight = false;
          if (again) {
            again = false;
            refresh();
          }
        });
    }

    function refreshSoon() {
      setTimeout(refresh, 0);
    }

    var source = new EventSource(url);
    source.addEventListener("changed", refresh);
  }

  function start() {
    localTimes(document);
    var content = document.getElementById("content");
    var url = content && content.getAttribute("data-live");
    if (url && window.EventSource && window.fetch && window.DOMParser) {
      live(content, url);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
