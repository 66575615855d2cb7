// The console's only script (no inline scripts: the Content-Security-Policy forbids them).
'use strict';
