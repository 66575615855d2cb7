/**
 * The multi-replica row of `npm run bench:waits`: 3 replicas of the server behind
 * the local nginx cluster (test/tools/local-cluster.ts), BENCH_PARKED blocking message waits opened
 * through nginx (which spreads them over the replicas), all on one mailbox; then
 *
 *   cluster wake latency  ROUNDS rounds with the others parked: a wait on replica i, the ingest on
 *                         replica i+1 (ingest HTTP response → waiter result) [p50 ≤ 10, p99 ≤ 50 ms]
 *   cluster fan-out       one ingest (through nginx) wakes the BENCH_PARKED waiters on all three
 *                         replicas: time to the last response, and p99 of ingest response → result
 *
 * BENCH_CLUSTER=off skips it. The balancer is given room for every parked call: its client and
 * its upstream connection are two open files of an nginx worker, so 10,000 calls take 3 workers
 * within a 20,000 file limit.
 */
import { Agent } from 'node:http';
import { LocalCluster, startLocalCluster } from '../tools/local-cluster';
import { activeWaits } from '../support/metrics';
import { waitFor } from '../support/wait-for';
import { rawCall, RawCall, toolResult } from './raw-mcp';
import { BenchRow, count, percentile } from './report';

const REPLICAS = 3;

export interface ClusterBenchOptions {
  /** The replicas' settings: DATABASE_URL (migrated, with the bootstrap token), limits. */
  env: Record<string, string>;
  /** The bootstrap admin token's secret. */
  token: string;
  parked: number;
  openConcurrency: number;
  rounds: number;
  /** The parked waits' timeout_seconds (they must outlast the parking). */
  waitSeconds: number;
  parkTimeoutMs: number;
  progress: (step: string) => void;
}

/** Every call on its own connection (`Connection: close` clients): a parked call holds its connection anyway. */
const agent = new Agent({ keepAlive: false, maxSockets: Infinity });

function call(url: string, token: string, body: unknown): RawCall {
  return rawCall(url, token, body, agent);
}

/** Runs the cluster bench and returns its table rows (none with BENCH_CLUSTER=off). */
export async function clusterBenchRows(options: ClusterBenchOptions): Promise<BenchRow[]> {
  if (process.env.BENCH_CLUSTER === 'off') return [];
  const { token, parked } = options;
  options.progress(`cluster: ${REPLICAS} replicas behind nginx`);
  const cluster: LocalCluster = await startLocalCluster({
    replicas: REPLICAS,
    port: 0,
    databaseUrl: options.env.DATABASE_URL,
    env: options.env,
    balancerRequests: parked + 1000,
  });
  let rpcId = 0;
  const messageWait = (baseUrl: string, mailboxId: string, timeoutSeconds: number) => {
    const { accepted, body } = call(`${baseUrl}/mcp`, token, {
      jsonrpc: '2.0',
      id: ++rpcId,
      method: 'tools/call',
      params: {
        name: 'email_await',
        arguments: { event: { type: 'message_received', mailbox_id: mailboxId }, timeout_seconds: timeoutSeconds },
      },
    });
    let at = 0;
    const result = body.then((text) => {
      at = performance.now();
      return { ...toolResult(text), at };
    });
    // A call that fails is reported when the results are collected, not as an unhandled rejection.
    result.catch(() => undefined);
    return { accepted, result };
  };
  const ingest = (baseUrl: string, mailboxId: string) =>
    call(`${baseUrl}/v1/mailboxes/${mailboxId}/messages`, token, {
      from: 'bench@example.org',
      to: ['agent@example.com'],
      subject: 'bench',
      text: 'bench',
    }).body;
  const parkedOn = async () => {
    const counts = await Promise.all(cluster.replicas.map((r) => activeWaits(r.url, 'message')));
    return { total: counts.reduce((a, b) => a + b, 0), counts };
  };
  try {
    const createMailbox = async (name: string) =>
      (
        JSON.parse(await call(`${cluster.url}/v1/mailboxes`, token, { address: `${name}@example.com` }).body) as {
          mailbox_id: string;
        }
      ).mailbox_id;
    const fanOutMailbox = await createMailbox('cluster-fan-out');
    const latencyMailbox = await createMailbox('cluster-latency');

    options.progress(`cluster: parking ${parked} waits through nginx`);
    const opening = performance.now();
    const waits: ReturnType<typeof messageWait>[] = [];
    let next = 0;
    const lane = async () => {
      while (next < parked) {
        next++;
        const wait = messageWait(cluster.url, fanOutMailbox, options.waitSeconds);
        waits.push(wait);
        await wait.accepted;
      }
    };
    await Promise.all(Array.from({ length: Math.min(options.openConcurrency, parked) }, lane));
    await waitFor(`${parked} parked waits on the cluster`, async () => (await parkedOn()).total === parked, {
      timeoutMs: options.parkTimeoutMs,
      intervalMs: 200,
    });
    const openSeconds = (performance.now() - opening) / 1000;
    const spread = (await parkedOn()).counts.map(count).join(' / ');

    options.progress('cluster: wake latency rounds');
    const samples: number[] = [];
    for (let i = 0; i < options.rounds; i++) {
      const waitOn = cluster.replicas[i % REPLICAS];
      const ingestOn = cluster.replicas[(i + 1) % REPLICAS];
      const wait = messageWait(waitOn.url, latencyMailbox, 30);
      await waitFor('the latency wait to park', async () => (await parkedOn()).total === parked + 1, {
        intervalMs: 5,
      });
      await ingest(ingestOn.url, latencyMailbox);
      const answered = performance.now();
      const result = await wait.result;
      if (!result.matched) throw new Error(`cluster round ${i}: not matched`);
      samples.push(Math.max(0, result.at - answered));
    }
    samples.sort((a, b) => a - b);
    const p50 = percentile(samples, 50);
    const p99 = percentile(samples, 99);

    options.progress('cluster: fan-out');
    const started = performance.now();
    await ingest(cluster.url, fanOutMailbox);
    const answered = performance.now();
    const results = await Promise.all(waits.map((w) => w.result));
    const fanOut = Math.max(...results.map((r) => r.at)) - started;
    const matched = results.filter((r) => r.matched).length;
    const wakes = results.map((r) => Math.max(0, r.at - answered)).sort((a, b) => a - b);

    return [
      [
        'cluster wake latency',
        `${REPLICAS} replicas behind nginx, ${count(parked)} others parked over them (${spread}), ${options.rounds} rounds: wait on replica i, ingest on replica i+1, ingest response → wait result`,
        `p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms`,
        p50 <= 10 && p99 <= 50 ? 'met (p50 ≤ 10, p99 ≤ 50 ms)' : 'MISSED (p50 ≤ 10, p99 ≤ 50 ms)',
      ],
      [
        'cluster fan-out',
        `${count(parked)} waits on one mailbox opened through nginx in ${openSeconds.toFixed(1)} s, spread ${spread} over ${REPLICAS} replicas; 1 ingest through nginx wakes all (${count(matched)} matched)`,
        `${fanOut.toFixed(0)} ms to the last response; ingest response → result p50 ${percentile(wakes, 50).toFixed(0)} ms, p99 ${percentile(wakes, 99).toFixed(0)} ms`,
        fanOut <= 1000 && matched === parked ? 'met (≤ 1 s)' : 'MISSED (≤ 1 s)',
      ],
    ];
  } finally {
    await cluster.stop();
  }
}
