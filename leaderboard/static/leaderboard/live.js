// Live top list: the board stream (server-sent events, manage.py serve_board_stream) pushes the
// list as rank events change it; while the stream is down (none configured, refused, or cut),
// the JSON list named by the table's data-live-url is re-read once a second instead, and the
// stream is tried again with a growing pause. Either way the rows are redrawn, highlighting
// those that moved.
//
// The stream runs in its own process, never in gunicorn: an open stream would pin a sync worker
// per page (docs/events.md, "Live pages"). Polling stays the fallback because it needs nothing
// but the API: the top list is a snapshot refreshed once a second with an ETag, so an unchanged
// poll is a 304 with no body, answered from each process's memory; polling stops while the tab
// is hidden.
//
// Never backwards: each top list carries a version (X-Snapshot-Version, or the stream's
// "version"; the page's own list in data-version), and two answers may come from two server
// processes, one of them a version behind. A list older than the one on screen is ignored; the
// ETag sent tells the server the version seen, so it answers no older one either.
(function () {
  "use strict";
  var table = document.querySelector("table[data-live-url]");
  if (!table || !window.fetch) { return; }
  var url = table.getAttribute("data-live-url");
  var playerUrl = table.getAttribute("data-player-url") || "";
  var highlight = table.getAttribute("data-highlight");
  var withMetadata = table.hasAttribute("data-metadata");
  // A league board: a cell with each entry's tier after the player's.
  var withTier = table.hasAttribute("data-tiers");
  // A board with max-attempts (a tournament): a cell with each entry's attempts, of the max.
  var maxAttempts = table.getAttribute("data-attempts");
  // The board's tie-break columns, in order: one cell each after the points.
  var tiebreakers = (table.getAttribute("data-tiebreakers") || "").split(",").filter(Boolean);
  var statusEl = document.getElementById("live-status");
  var tbody = table.tBodies[0];
  var streamUrl = window.EventSource ? table.getAttribute("data-stream-url") : null;
  var INTERVAL_MS = 1000;
  var MAX_BACKOFF_MS = 10000;
  var STREAM_RETRY_MS = 5000;
  var STREAM_MAX_RETRY_MS = 60000;
  // Longer than two of the server's heartbeats (board_stream.py HEARTBEAT_SECONDS, 15 s).
  var STREAM_SILENT_MS = Number(table.getAttribute("data-stream-silent-ms")) || 40000;
  // True while the stream is open and delivering: polling pauses meanwhile.
  var streaming = false;
  var streamFailures = 0;
  // The version and ETag of the list on screen: the server-rendered one's, then the newest
  // answer's (null for the lists that carry no version: daily and weekly).
  var version = toVersion(table.getAttribute("data-version"));
  var etag = table.getAttribute("data-etag") || null;
  var failures = 0;
  var stopped = false;

  // Versions are integers below 2^53 (microseconds): exact as JavaScript numbers.
  function toVersion(text) {
    if (!text || !/^[0-9]+$/.test(text)) { return null; }
    return Number(text);
  }

  // An answer of version `got`: older than the list on screen?
  function older(got) {
    return got !== null && version !== null && got < version;
  }

  function adopt(got, tag) {
    if (got !== null) {
      version = got;
      table.setAttribute("data-version", String(got));
    }
    if (tag) { etag = tag; }
  }

  // What each player showed last: "rank:points", keyed by player id.
  function shown() {
    var seen = {};
    var rows = tbody.rows;
    for (var i = 0; i < rows.length; i++) {
      var player = rows[i].getAttribute("data-player");
      // The points cell: after the player's, and after the tier's on a league board.
      if (player) {
        seen[player] = rows[i].cells[0].textContent + ":" + rows[i].cells[withTier ? 3 : 2].textContent;
      }
    }
    return seen;
  }

  function cell(text, numeric) {
    var td = document.createElement("td");
    if (numeric) { td.className = "num"; }
    td.textContent = text;
    return td;
  }

  // The flag of an ISO 3166-1 alpha-2 code as its two regional-indicator symbols (FR -> the
  // French flag in the reader's own emoji font: no image, no request), as the server renders
  // it (leaderboard/templatetags/names.py); "" for anything else.
  function flag(country) {
    if (typeof country !== "string" || !/^[A-Za-z]{2}$/.test(country)) { return ""; }
    var upper = country.toUpperCase();
    return String.fromCodePoint(0x1F1E6 + upper.charCodeAt(0) - 65, 0x1F1E6 + upper.charCodeAt(1) - 65);
  }

  // The player cell: the flag, then the name linked to the player's page ("Player <id>" for a
  // player without a name to show: unknown, or hidden by staff).
  function playerCell(entry, player) {
    var td = document.createElement("td");
    var mark = flag(entry.country);
    if (mark) {
      var span = document.createElement("span");
      span.className = "flag";
      span.setAttribute("role", "img");
      span.setAttribute("aria-label", entry.country);
      span.title = entry.country;
      span.textContent = mark;
      td.appendChild(span);
      td.appendChild(document.createTextNode(" "));
    }
    var link = document.createElement("a");
    link.href = playerUrl + "?player=" + encodeURIComponent(player);
    link.textContent = entry.displayName || "Player " + player;
    td.appendChild(link);
    return td;
  }

  // An entry's metadata as one line, as the server writes it (metadata_text in
  // leaderboard/templatetags/names.py): "key: value" pairs joined by " \u00b7 ".
  function metadataText(metadata) {
    if (!metadata || typeof metadata !== "object" || Array.isArray(metadata)) { return ""; }
    return Object.keys(metadata).map(function (key) {
      var value = metadata[key];
      return key + ": " + (typeof value === "string" ? value : JSON.stringify(value));
    }).join(" \u00b7 ");
  }

  function render(entries) {
    var before = shown();
    var hadRows = Object.keys(before).length > 0;
    var fragment = document.createDocumentFragment();
    entries.forEach(function (entry) {
      var player = String(entry.playerId);
      var tr = document.createElement("tr");
      tr.setAttribute("data-player", player);
      var classes = [];
      if (player === highlight) { classes.push("me"); }
      // New on the list, or a new rank or score: highlighted (not on the first fill).
      if (hadRows && before[player] !== entry.rank + ":" + entry.points) { classes.push("changed"); }
      if (classes.length) { tr.className = classes.join(" "); }
      tr.appendChild(cell(String(entry.rank), true));
      tr.appendChild(playerCell(entry, player));
      if (withTier) {
        var tier = cell(entry.tier || "", false);
        tier.className = "tier";
        tr.appendChild(tier);
      }
      tr.appendChild(cell(String(entry.points), true));
      tiebreakers.forEach(function (name) {
        var values = entry.tiebreakers || {};
        tr.appendChild(cell(name in values ? String(values[name]) : "", true));
      });
      if (maxAttempts) {
        var attempts = cell((entry.attempts == null ? "" : String(entry.attempts)) + "/" + maxAttempts, true);
        attempts.className = "num attempts";
        tr.appendChild(attempts);
      }
      if (withMetadata) {
        var details = cell(metadataText(entry.metadata), false);
        details.className = "meta";
        tr.appendChild(details);
      }
      fragment.appendChild(tr);
    });
    if (!entries.length) {
      var empty = document.createElement("tr");
      empty.className = "empty";
      var td0 = cell("No scores yet.", false);
      td0.colSpan = 3 + tiebreakers.length + (withMetadata ? 1 : 0) + (withTier ? 1 : 0) + (maxAttempts ? 1 : 0);
      empty.appendChild(td0);
      fragment.appendChild(empty);
    }
    tbody.replaceChildren(fragment);
  }

  function say(text, down) {
    if (!statusEl) { return; }
    if (statusEl.textContent !== text) { statusEl.textContent = text; }
    statusEl.classList.toggle("down", !!down);
    table.classList.toggle("stale", !!down);
  }

  function schedule() {
    if (stopped) { return; }
    var wait = failures ? Math.min(INTERVAL_MS * Math.pow(2, failures), MAX_BACKOFF_MS) : INTERVAL_MS;
    window.setTimeout(poll, wait);
  }

  function poll() {
    if (document.hidden || streaming) { schedule(); return; }
    var headers = { "Accept": "application/json" };
    if (etag) { headers["If-None-Match"] = etag; }
    // no-store: the 304 comes back to this code (not a cached 200), so nothing is redrawn.
    fetch(url, { headers: headers, cache: "no-store", credentials: "omit" })
      .then(function (response) {
        var got = toVersion(response.headers.get("X-Snapshot-Version"));
        if ((response.status === 304 || response.ok) && older(got)) { return null; }
        if (response.status === 304) {
          // The same entries, perhaps under a newer version.
          adopt(got, response.headers.get("ETag"));
          return null;
        }
        if (response.ok) {
          var tag = response.headers.get("ETag");
          return response.json().then(function (entries) {
            adopt(got, tag);
            return entries;
          });
        }
        var error = new Error("HTTP " + response.status);
        error.status = response.status;
        throw error;
      })
      .then(function (entries) {
        if (entries) { render(entries); }
        failures = 0;
        table.setAttribute("data-updated", String(Date.now()));
        say("Live: updates every second.", false);
      })
      .catch(function (error) {
        if (error.status === 404) {
          stopped = true;
          say("This board no longer exists; live updates stopped.", true);
          return;
        }
        failures += 1;
        if (error.status === 429) {
          say("Live updates slowed down: too many requests. The list below may be behind.", true);
        } else if (error.status === 503 || !error.status || error.status >= 500) {
          say("The leaderboard service is unavailable right now" +
              (error.status ? " (HTTP " + error.status + ")" : "") +
              ". The list below may be out of date; retrying.", true);
        } else {
          say("Live updates failed (" + error.message + "); retrying.", true);
        }
      })
      .then(schedule);
  }

  // The board stream: each "top" message is the whole list ({"version", "entries"}).
  function listen() {
    streamUrl = window.EventSource ? table.getAttribute("data-stream-url") : null;
    if (!streamUrl || stopped) { return; }
    var source = new EventSource(streamUrl);
    var heard = Date.now();
    // A path that dies silently (a laptop asleep, a NAT or proxy dropping the connection) fires
    // no error for minutes; the server sends a "ping" at least every 15 s, so a stream silent
    // for longer than STREAM_SILENT_MS is given up like a cut one: poll, and listen again.
    var watchdog = window.setInterval(function () {
      if (Date.now() - heard > STREAM_SILENT_MS) { source.onerror(); }
    }, STREAM_SILENT_MS / 4);
    source.addEventListener("ping", function () { heard = Date.now(); });
    source.addEventListener("top", function (message) {
      heard = Date.now();
      var list;
      try { list = JSON.parse(message.data); } catch (e) { return; }
      var got = typeof list.version === "number" ? list.version : null;
      streaming = true;
      streamFailures = 0;
      failures = 0;
      table.setAttribute("data-source", "stream");
      table.setAttribute("data-updated", String(Date.now()));
      say("Live: streaming updates.", false);
      if (older(got)) { return; }
      adopt(got, null);
      // The poll's ETag names an older list now: the next poll (if any) gets a full answer.
      etag = null;
      render(list.entries || []);
    });
    source.addEventListener("unavailable", function () {
      heard = Date.now();
      say("The leaderboard service is unavailable right now. The list below may be out of " +
          "date; retrying.", true);
    });
    source.onerror = function () {
      // Refused (no stream there, too many streams), cut or silent: poll until it is back. The
      // browser would reconnect on its own after a cut, but not after a refusal; one path for all.
      window.clearInterval(watchdog);
      source.onerror = null;
      source.close();
      streaming = false;
      table.setAttribute("data-source", "poll");
      streamFailures += 1;
      var wait = Math.min(STREAM_RETRY_MS * Math.pow(2, streamFailures - 1), STREAM_MAX_RETRY_MS);
      window.setTimeout(listen, wait);
    };
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) { failures = 0; }
  });
  table.setAttribute("data-source", "poll");
  listen();
  schedule();
})();
