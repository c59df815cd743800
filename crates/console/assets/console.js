// The handoff console's one script. Pages work without it; it only
// (1) shows each <time> in the viewer's own zone, keeping the absolute UTC
//     time in the title (shown on hover), and
// (2) refreshes a live page: when <main id="content" data-live="URL"> is
//     present it listens to that Server-Sent Events URL and, on an event
//     named "changed", fetches this page again and swaps in its #content.
//     The URL names the version the page drew (since=…); a fetched page
//     names a newer one, and the script listens there from then on, so a
//     reconnect resumes from what is shown, not from the first load.
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
          follow(fresh.getAttribute("data-live"));
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

    var source = null;
    function listen() {
      source = new EventSource(url);
      source.addEventListener("changed", refresh);
    }
    listen();

    // The stream of the page just swapped in, when it names another.
    function follow(next) {
      if (!next || next === url) {
        return;
      }
      url = next;
      content.setAttribute("data-live", next);
      if (source) {
        source.close();
        listen();
      }
    }
    // A page left for another holds no stream: a browser opens only a few
    // connections per site, and streams of pages kept in its back-forward
    // cache would hold them until the server's next keep-alive. Back on
    // the page, the stream reopens and the page catches up.
    window.addEventListener("pagehide", function () {
      if (source) {
        source.close();
        source = null;
      }
    });
    window.addEventListener("pageshow", function (event) {
      if (event.persisted && !source) {
        listen();
        refresh();
      }
    });
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
