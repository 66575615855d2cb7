// The console's only script (no inline scripts: the Content-Security-Policy forbids them).
'use strict';

// Times arrive as UTC text in <time datetime>; show them in the reader's own time zone.
document.addEventListener('DOMContentLoaded', function () {
  var format = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
  document.querySelectorAll('time[datetime]').forEach(function (el) {
    var when = new Date(el.getAttribute('datetime'));
    if (!isNaN(when.getTime())) {
      el.textContent = format.format(when);
      el.title = when.toISOString();
    }
  });
});
