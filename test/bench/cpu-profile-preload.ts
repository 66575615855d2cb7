/**
 * Preloaded into the server by `bench:auth` and `bench:waits` with BENCH_CPU_PROF=<dir> (`node --require`): what
 * `node --cpu-prof` does, which NODE_OPTIONS does not allow. Profiles from start to exit and writes
 * `<dir>/server-<pid>.cpuprofile` (open it in Chrome DevTools or speedscope).
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

const dir = process.env.BENCH_CPU_PROF;
if (dir) {
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.start');
  // An in-process inspector session answers synchronously, so the profile is written before exit.
  process.on('exit', () => {
    session.post('Profiler.stop', (err, result) => {
      if (!err) writeFileSync(join(dir, `server-${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}
