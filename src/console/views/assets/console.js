// The console's only script (no inline scripts: the Content-Security-Policy forbids them).
'use strict';

// Times arrive as UTC text in <time datetime>; show them in the reader's own time zone. A time
// marked data-relative (an expiry) reads "in 3 hours", with the absolute time as its tooltip.
var timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
var relativeFormat = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
function localizeTimes(root) {
  root.querySelectorAll('time[datetime]').forEach(function (el) {
    var when = new Date(el.getAttribute('datetime'));
    if (isNaN(when.getTime())) return;
    if (el.hasAttribute('data-relative')) {
      el.textContent = relativeTime(when.getTime() - Date.now());
      el.title = timeFormat.format(when);
    } else {
      el.textContent = timeFormat.format(when);
      el.title = when.toISOString();
    }
  });
}

// The largest unit that fits, rounded: "in 45 seconds", "in 20 minutes", "in 3 hours", "in 2 days".
var UNITS = [
  ['day', 86400000, 2],
  ['hour', 3600000, 1.5],
  ['minute', 60000, 1],
];
function relativeTime(ms) {
  for (var i = 0; i < UNITS.length; i++) {
    var unit = UNITS[i];
    if (Math.abs(ms) >= unit[1] * unit[2]) return relativeFormat.format(Math.round(ms / unit[1]), unit[0]);
  }
  return relativeFormat.format(Math.round(ms / 1000), 'second');
}

function requestIds(root) {
  return Array.prototype.map.call(root.querySelectorAll('[data-request-id]'), function (el) {
    return el.getAttribute('data-request-id');
  });
}

function plural(count, one, many) {
  return count + ' ' + (count === 1 ? one : many);
}

// The live pending list (docs/approvers.md): one Server-Sent Events stream that the server writes to when a
// request of the listed mailboxes changes; the browser never asks again on its own. Each event
// carries the list as the server renders it, which replaces the list in place. Without this
// script the page is the same list, current as of its last load.
function followPendingList(list) {
  var announcer = document.getElementById('pending-announcer');
  var source = new EventSource(list.getAttribute('data-events'));
  source.addEventListener('pending', function (event) {
    var update = JSON.parse(event.data);
    if (update.fingerprint === list.getAttribute('data-fingerprint')) return;
    var before = requestIds(list);
    list.innerHTML = update.html;
    list.setAttribute('data-fingerprint', update.fingerprint);
    localizeTimes(list);
    var count = document.getElementById('pending-count');
    if (count) count.textContent = String(update.pending_count);
    var after = requestIds(list);
    var added = after.filter(function (id) {
      return before.indexOf(id) < 0;
    }).length;
    var left = before.filter(function (id) {
      return after.indexOf(id) < 0;
    }).length;
    var news = [];
    if (added > 0) news.push(plural(added, 'new request', 'new requests'));
    if (left > 0) news.push(plural(left, 'request', 'requests') + ' decided or gone');
    if (news.length > 0)
      announcer.textContent = news.join(', ') + '. ' + plural(after.length, 'request', 'requests') + ' pending.';
  });
  // The session ended: nothing more will come. Signed out (in another tab, maybe on another
  // replica) or expired: the list must not stay on screen, so the page goes to the sign-in page,
  // which says why. The token lost its access: the page says so; the next click shows why.
  source.addEventListener('ended', function (event) {
    source.close();
    var reason = JSON.parse(event.data).reason;
    if (reason === 'signed_out') {
      window.location.replace('/console/sign-in?signed_out=1');
      return;
    }
    if (reason === 'session_expired') {
      window.location.replace('/console/sign-in?expired=1');
      return;
    }
    announcer.className = 'notice';
    announcer.textContent = 'Your session ended. Reload the page to sign in again.';
  });
  // A submitted form (sign out, filter) is leaving the page: its answer must not race a late event.
  document.addEventListener('submit', function () {
    source.close();
  });
  // The browser gave up (a reconnect was refused, e.g. the session is gone): no retrying forever,
  // and no list that silently stops changing.
  source.addEventListener('error', function () {
    if (source.readyState !== EventSource.CLOSED) return;
    announcer.className = 'notice';
    announcer.textContent = 'Live updates stopped. Reload the page to see the current list.';
  });
}

document.addEventListener('DOMContentLoaded', function () {
  localizeTimes(document);
  // Relative times go stale as the page stays open: "in 3 minutes" must not still say so later.
  window.setInterval(function () {
    localizeTimes(document);
  }, 30000);
  var list = document.getElementById('pending-list');
  if (list && window.EventSource) followPendingList(list);
});
