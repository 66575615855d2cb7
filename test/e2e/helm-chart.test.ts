import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { helmBinary, runHelm } from '../support/helm';
import {
  all,
  CHART,
  container,
  DATABASE_URL,
  envFile,
  envVar,
  HOST,
  isHook,
  Manifest,
  one,
  own,
  REQUIRED,
  SECRET_SETTINGS,
  secretRef,
  template,
  templateFails,
} from '../support/helm-chart';
import { REPO_ROOT } from '../support/spawned-server';

/**
 * The Helm chart `helm/alcarta` (docs/operators.md) and the image it deploys, checked with a real
 * Helm binary (no cluster): `helm lint` passes, `helm template` renders what operators rely on
 * (replicas, probes, the preStop/drain/grace timeline, non-root pods, settings wiring, an Ingress
 * that keeps websockets and SSE working, the migration hook, PDB/HPA), values.schema.json refuses
 * invalid values, and the Dockerfile starts `node dist/main.js` — the command the other tests run.
 */
describe('Helm chart helm/alcarta and the Dockerfile', () => {
  let rendered: Manifest[];

  before(() => {
    helmBinary();
    rendered = template(...REQUIRED);
  });

  it('passes helm lint, also --strict, with its defaults and with the required values', () => {
    for (const args of [
      [],
      ['--strict'],
      ['--strict', '-f', `${CHART}/ci/ci-values.yaml`],
      ['--strict', ...REQUIRED],
    ]) {
      const result = runHelm(['lint', CHART, ...args]);
      assert.equal(result.status, 0, `helm lint ${args.join(' ')} failed:\n${result.stdout}\n${result.stderr}`);
      assert.match(result.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
      assert.doesNotMatch(result.stdout, /\[(ERROR|WARNING)\]/);
    }
  });

  it('renders a Deployment of 2 replicas running the image CMD with health probes', () => {
    const deployment = one(rendered, 'Deployment');
    assert.equal(deployment.spec.replicas, 2);
    const c = container(deployment);
    assert.equal(c.image, 'registry.example.com/alcarta:0.1.0');
    // The image's CMD (`node dist/main.js`) must run as is: nothing overrides it.
    assert.equal(c.command, undefined);
    assert.equal(c.args, undefined);
    assert.deepEqual(c.ports, [
      { name: 'http', containerPort: 3000, protocol: 'TCP' },
      { name: 'smtp', containerPort: 2525, protocol: 'TCP' },
    ]);
    assert.deepEqual(c.livenessProbe.httpGet, { path: '/health/live', port: 'http' });
    assert.deepEqual(c.readinessProbe.httpGet, { path: '/health/ready', port: 'http' });
    assert.ok(c.resources.requests.cpu && c.resources.requests.memory, 'resource requests');
    assert.ok(c.resources.limits.memory, 'memory limit');
    assert.equal(deployment.spec.strategy.rollingUpdate.maxUnavailable, 0);
  });

  it('drains before SIGTERM and gives the drain time: preStop sleep, then a longer grace period', () => {
    const deployment = one(rendered, 'Deployment');
    const drain = Number(own(rendered, 'ConfigMap').data.ALCARTA_SHUTDOWN_GRACE_SECONDS);
    assert.equal(drain, 10);
    assert.deepEqual(container(deployment).lifecycle.preStop.exec.command, ['sleep', '10']);
    assert.ok(deployment.spec.template.spec.terminationGracePeriodSeconds > 10 + drain);

    // Computed from the values it must cover...
    const longer = template(
      ...REQUIRED,
      '--set',
      'preStop.sleepSeconds=20',
      '--set',
      'config.ALCARTA_SHUTDOWN_GRACE_SECONDS=30',
    );
    assert.deepEqual(container(one(longer, 'Deployment')).lifecycle.preStop.exec.command, ['sleep', '20']);
    assert.ok(one(longer, 'Deployment').spec.template.spec.terminationGracePeriodSeconds > 20 + 30);
    assert.equal(own(longer, 'ConfigMap').data.ALCARTA_SHUTDOWN_GRACE_SECONDS, '30');

    // ...an explicit value is used when it is long enough, refused when the kubelet would cut the drain.
    const explicit = template(...REQUIRED, '--set', 'terminationGracePeriodSeconds=45');
    assert.equal(one(explicit, 'Deployment').spec.template.spec.terminationGracePeriodSeconds, 45);
    assert.match(
      templateFails(...REQUIRED, '--set', 'terminationGracePeriodSeconds=20'),
      /terminationGracePeriodSeconds \(20\) must be larger than .* \(20\)/,
    );

    const noPreStop = template(...REQUIRED, '--set', 'preStop.sleepSeconds=0');
    assert.equal(container(one(noPreStop, 'Deployment')).lifecycle, undefined);
  });

  it('runs pods as non-root with a read-only root filesystem and no service account token', () => {
    const deployment = one(rendered, 'Deployment');
    const job = one(rendered, 'Job');
    for (const pod of [deployment.spec.template.spec, job.spec.template.spec]) {
      assert.equal(pod.securityContext.runAsNonRoot, true);
      assert.equal(pod.securityContext.runAsUser, 1000);
      assert.equal(pod.securityContext.seccompProfile.type, 'RuntimeDefault');
      assert.equal(pod.automountServiceAccountToken, false);
      const sc = pod.containers[0].securityContext;
      assert.equal(sc.runAsNonRoot, true);
      assert.equal(sc.allowPrivilegeEscalation, false);
      assert.equal(sc.readOnlyRootFilesystem, true);
      assert.deepEqual(sc.capabilities.drop, ['ALL']);
      const tmp = (pod.containers[0].volumeMounts as Manifest[]).find((v) => v.mountPath === '/tmp');
      assert.ok(tmp, '/tmp is mounted');
      assert.ok((pod.volumes as Manifest[]).find((v) => v.name === tmp.name)?.emptyDir, '/tmp is an emptyDir');
    }
  });

  it('wires settings from the ConfigMap and DATABASE_URL from the Secret, with ALCARTA_MIGRATIONS=off', () => {
    const c = container(one(rendered, 'Deployment'));
    const configMap = own(rendered, 'ConfigMap');
    const secret = own(rendered, 'Secret');
    assert.deepEqual(c.envFrom, [{ configMapRef: { name: configMap.metadata.name } }]);
    assert.deepEqual(secretRef(c, 'DATABASE_URL'), {
      name: secret.metadata.name,
      key: 'DATABASE_URL',
    });
    assert.deepEqual(secretRef(c, 'ALCARTA_BOOTSTRAP_TOKEN'), {
      name: secret.metadata.name,
      key: 'ALCARTA_BOOTSTRAP_TOKEN',
      optional: true,
    });
    assert.equal(secret.stringData.DATABASE_URL, DATABASE_URL);
    assert.equal(secret.stringData.ALCARTA_BOOTSTRAP_TOKEN, undefined);
    assert.equal(configMap.data.ALCARTA_MIGRATIONS, 'off');
    assert.equal(envVar(c, 'ALCARTA_MIGRATIONS'), undefined, 'nothing overrides the ConfigMap');

    const token = `alc_${'A1b2C3d4'.repeat(6)}`;
    const withToken = own(template(...REQUIRED, '--set', `bootstrapToken=${token}`), 'Secret');
    assert.equal(withToken.stringData.ALCARTA_BOOTSTRAP_TOKEN, token);
  });

  it('puts every setting of .env.example except the secret ones in the ConfigMap, with its defaults', () => {
    const defaults = envFile();
    assert.ok(defaults.size > 20, 'parsed .env.example');
    const data = own(rendered, 'ConfigMap').data as Record<string, string>;
    const expected = [...defaults.keys()].filter((k) => !SECRET_SETTINGS.includes(k)).sort();
    assert.deepEqual(Object.keys(data).sort(), expected);
    for (const key of expected) {
      if (key === 'ALCARTA_MIGRATIONS') assert.equal(data[key], 'off', 'the Job migrates');
      else if (key === 'ALCARTA_PUBLIC_URL') assert.equal(data[key], `http://${HOST}`, 'from the ingress host');
      else if (key === 'ALCARTA_TRUSTED_PROXIES')
        assert.equal(data[key], 'uniquelocal', 'the ingress pods are trusted');
      else assert.equal(data[key], defaults.get(key), `${key} keeps the default of .env.example`);
    }

    // ALCARTA_PUBLIC_URL: https with TLS; an explicit value wins; without ingress, the app default (PORT).
    const publicUrl = (...args: string[]) => own(template(...REQUIRED, ...args), 'ConfigMap').data.ALCARTA_PUBLIC_URL;
    assert.equal(
      publicUrl('--set', 'ingress.tls.enabled=true', '--set', 'ingress.tls.secretName=alcarta-tls'),
      `https://${HOST}`,
    );
    assert.equal(publicUrl('--set', 'config.ALCARTA_PUBLIC_URL=https://mcp.example.org'), 'https://mcp.example.org');
    assert.equal(publicUrl('--set', 'ingress.enabled=false'), `http://localhost:${defaults.get('PORT')}`);
    assert.equal(
      publicUrl('--set', 'ingress.enabled=false', '--set', 'config.PORT=3901'),
      'http://localhost:3901',
      'the app default follows PORT',
    );

    // Without the Job, the replicas migrate at start; on/off may be given as YAML booleans.
    assert.equal(
      own(template(...REQUIRED, '--set', 'migrationJob.enabled=false'), 'ConfigMap').data.ALCARTA_MIGRATIONS,
      'on',
    );
    assert.equal(
      own(template(...REQUIRED, '--set', 'config.ALCARTA_WEBSOCKETS=false'), 'ConfigMap').data.ALCARTA_WEBSOCKETS,
      'off',
    );
  });

  it('rolls the pods when a setting or the secret changes (checksum annotations)', () => {
    const checksums = (manifests: Manifest[]) => one(manifests, 'Deployment').spec.template.metadata.annotations;
    const base = checksums(rendered);
    assert.match(base['checksum/config'], /^[0-9a-f]{64}$/);
    assert.match(base['checksum/secret'], /^[0-9a-f]{64}$/);
    const config = checksums(template(...REQUIRED, '--set', 'config.ALCARTA_LOG_LEVEL=debug'));
    assert.notEqual(config['checksum/config'], base['checksum/config']);
    assert.equal(config['checksum/secret'], base['checksum/secret']);
    const secret = checksums(template(...REQUIRED, '--set', `database.url=${DATABASE_URL}2`));
    assert.notEqual(secret['checksum/secret'], base['checksum/secret']);
    assert.equal(secret['checksum/config'], base['checksum/config']);
  });

  it('renders a ClusterIP Service on port 80 to the http port', () => {
    const service = one(rendered, 'Service', 'rel-alcarta');
    assert.equal(service.spec.type, 'ClusterIP');
    assert.deepEqual(service.spec.ports, [{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }]);
    const podLabels = one(rendered, 'Deployment').spec.template.metadata.labels;
    for (const [key, value] of Object.entries(service.spec.selector)) assert.equal(podLabels[key], value);
  });

  it('renders an ingress-nginx Ingress that keeps websockets and SSE working', () => {
    const ingress = one(rendered, 'Ingress');
    const a = ingress.metadata.annotations;
    assert.equal(a['nginx.ingress.kubernetes.io/proxy-http-version'], '1.1');
    assert.equal(a['nginx.ingress.kubernetes.io/proxy-buffering'], 'off');
    assert.equal(a['nginx.ingress.kubernetes.io/proxy-request-buffering'], 'off');
    for (const key of ['proxy-read-timeout', 'proxy-send-timeout']) {
      const value = a[`nginx.ingress.kubernetes.io/${key}`];
      assert.match(value, /^\d+$/, `${key} is in seconds, unitless`);
      assert.ok(Number(value) >= 14400, `${key} ${value} >= 14400`);
    }
    assert.ok(Number(a['nginx.ingress.kubernetes.io/proxy-body-size']) >= 26214400, 'ingest bodies pass');
    assert.equal(ingress.spec.ingressClassName, 'nginx');
    assert.equal(ingress.spec.rules[0].host, HOST);
    assert.deepEqual(ingress.spec.rules[0].http.paths[0].backend.service, {
      name: one(rendered, 'Service', 'rel-alcarta').metadata.name,
      port: { name: 'http' },
    });

    // Extra annotations are added, but cannot switch buffering back on; longer waits raise the timeouts.
    const custom = one(
      template(
        ...REQUIRED,
        '--set-string',
        'ingress.annotations.nginx\\.ingress\\.kubernetes\\.io/proxy-buffering=on',
        '--set-string',
        'ingress.annotations.cert-manager\\.io/cluster-issuer=letsencrypt',
        '--set',
        'config.ALCARTA_MAX_REQUEST_WAIT_SECONDS=20000',
      ),
      'Ingress',
    ).metadata.annotations;
    assert.equal(custom['nginx.ingress.kubernetes.io/proxy-buffering'], 'off');
    assert.equal(custom['cert-manager.io/cluster-issuer'], 'letsencrypt');
    assert.equal(custom['nginx.ingress.kubernetes.io/proxy-read-timeout'], '20000');

    assert.deepEqual(all(template(...REQUIRED, '--set', 'ingress.enabled=false'), 'Ingress'), []);
  });

  it('runs `node dist/cli.js migrate` as a pre-install/pre-upgrade hook Job with the same settings', () => {
    const job = one(rendered, 'Job');
    const annotations = job.metadata.annotations;
    assert.deepEqual(annotations['helm.sh/hook'].split(',').sort(), ['pre-install', 'pre-upgrade']);
    assert.deepEqual(annotations['helm.sh/hook-delete-policy'].split(',').sort(), [
      'before-hook-creation',
      'hook-succeeded',
    ]);
    const c = job.spec.template.spec.containers[0];
    assert.deepEqual(c.command, ['node', 'dist/cli.js', 'migrate']);
    assert.equal(c.image, container(one(rendered, 'Deployment')).image);
    assert.equal(job.spec.template.spec.restartPolicy, 'Never');

    // A pre-install hook runs before the release's ConfigMap/Secret exist: it reads hook copies,
    // created first (lower weight), with the same content.
    const configName = c.envFrom[0].configMapRef.name;
    const databaseUrl = secretRef(c, 'DATABASE_URL');
    const hookConfig = one(rendered, 'ConfigMap', configName);
    const hookSecret = one(rendered, 'Secret', databaseUrl.name);
    assert.deepEqual(hookConfig.data, own(rendered, 'ConfigMap').data);
    assert.equal(hookSecret.stringData[databaseUrl.key], DATABASE_URL);
    assert.equal(hookSecret.stringData.ALCARTA_BOOTSTRAP_TOKEN, undefined, 'only what migrate needs');
    for (const copy of [hookConfig, hookSecret]) {
      assert.equal(copy.metadata.annotations['helm.sh/hook'], annotations['helm.sh/hook']);
      assert.ok(
        Number(copy.metadata.annotations['helm.sh/hook-weight']) < Number(annotations['helm.sh/hook-weight']),
        `${copy.kind} copy is created before the Job`,
      );
    }

    const noJob = template(...REQUIRED, '--set', 'migrationJob.enabled=false');
    assert.deepEqual(all(noJob, 'Job'), []);
    assert.deepEqual(noJob.filter(isHook), []);
  });

  it('trusts the CA certificates of a ConfigMap through NODE_EXTRA_CA_CERTS (a private CA of webhook receivers)', () => {
    const plain = one(rendered, 'Deployment');
    assert.equal(envVar(container(plain), 'NODE_EXTRA_CA_CERTS'), undefined, 'only the built-in CAs by default');
    assert.ok(!(plain.spec.template.spec.volumes as Manifest[]).some((v) => v.configMap));
    const deployment = one(
      template(...REQUIRED, '--set', 'extraCACerts.configMap=corp-ca', '--set', 'extraCACerts.key=bundle.pem'),
      'Deployment',
    );
    const c = container(deployment);
    const volume = (deployment.spec.template.spec.volumes as Manifest[]).find((v) => v.configMap?.name === 'corp-ca');
    assert.ok(volume, 'the ConfigMap is a volume');
    const mount = (c.volumeMounts as Manifest[]).find((m) => m.name === volume.name);
    assert.ok(mount, 'the volume is mounted');
    assert.equal(mount.readOnly, true);
    const [item] = volume.configMap.items as Manifest[];
    assert.equal(item.key, 'bundle.pem');
    assert.equal(envVar(c, 'NODE_EXTRA_CA_CERTS')?.value, `${mount.mountPath}/${item.path}`);
  });

  it('uses an existingSecret instead of creating one', () => {
    const manifests = template(
      '--set',
      'image.repository=registry.example.com/alcarta',
      '--set',
      `ingress.host=${HOST}`,
      '--set',
      'existingSecret=alcarta-db',
      '--set',
      'existingSecretKeys.databaseUrl=url',
    );
    assert.deepEqual(all(manifests, 'Secret'), [], 'the chart creates no Secret');
    const c = container(one(manifests, 'Deployment'));
    assert.deepEqual(secretRef(c, 'DATABASE_URL'), { name: 'alcarta-db', key: 'url' });
    assert.equal(secretRef(c, 'ALCARTA_BOOTSTRAP_TOKEN').name, 'alcarta-db');
    const job = one(manifests, 'Job').spec.template.spec.containers[0];
    assert.deepEqual(secretRef(job, 'DATABASE_URL'), { name: 'alcarta-db', key: 'url' });
  });

  it('renders a PodDisruptionBudget, and a CPU HorizontalPodAutoscaler only when enabled', () => {
    const pdb = one(rendered, 'PodDisruptionBudget');
    assert.equal(pdb.spec.minAvailable, 1);
    assert.deepEqual(pdb.spec.selector.matchLabels, one(rendered, 'Deployment').spec.selector.matchLabels);
    assert.deepEqual(all(rendered, 'HorizontalPodAutoscaler'), []);

    const scaled = template(...REQUIRED, '--set', 'autoscaling.enabled=true', '--set', 'autoscaling.maxReplicas=8');
    const hpa = one(scaled, 'HorizontalPodAutoscaler');
    assert.equal(hpa.apiVersion, 'autoscaling/v2');
    assert.deepEqual(hpa.spec.scaleTargetRef, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: one(scaled, 'Deployment').metadata.name,
    });
    assert.equal(hpa.spec.minReplicas, 2);
    assert.equal(hpa.spec.maxReplicas, 8);
    assert.equal(hpa.spec.metrics[0].resource.name, 'cpu');
    assert.equal(one(scaled, 'Deployment').spec.replicas, undefined, 'the HPA owns the replica count');
  });

  it('refuses invalid values through values.schema.json', () => {
    const cases: [string[], string][] = [
      [['--set', 'replicaCount=0'], '/replicaCount'],
      [['--set', 'config.ALCARTA_WEBSOCKETS=maybe'], '/config/ALCARTA_WEBSOCKETS'],
      [['--set', 'config.ALCARTA_MAX_BODY_BYTES=lots'], '/config/ALCARTA_MAX_BODY_BYTES'],
      [['--set-string', 'config.PORT=3000'], '/config/PORT'],
      [['--set', 'config.ALCARTA_KEEPALIVE_SECONDS=16'], '/config/ALCARTA_KEEPALIVE_SECONDS'],
      [['--set', 'config.ALCARTA_DB_POOL_SIZE=1'], '/config/ALCARTA_DB_POOL_SIZE'],
      [['--set', 'config.ALCARTA_LOG_LEVEL=loud'], '/config/ALCARTA_LOG_LEVEL'],
      [['--set', 'config.ALCARTA_MIGRATIONS=on'], '/config'],
      [['--set', 'config.ALCARTA_SHUTDOWN_GRACE_SECONDS=null'], '/config'],
      [['--set', 'ingress.proxyTimeoutSeconds=60'], '/ingress/proxyTimeoutSeconds'],
      [['--set', 'database.url=mysql://db/alcarta'], '/database/url'],
      [['--set', 'bootstrapToken=alc_short'], '/bootstrapToken'],
      [['--set', 'unknownSetting=1'], "'unknownSetting'"],
      [['--set', 'config.ALCARTA_SMTP_PORT=70000'], '/config/ALCARTA_SMTP_PORT'],
      [['--set', 'config.ALCARTA_SMTP_PORT=on'], '/config/ALCARTA_SMTP_PORT'],
      [['--set', 'config.ALCARTA_SMTP_AUTH=maybe'], '/config/ALCARTA_SMTP_AUTH'],
      [['--set', 'config.ALCARTA_SMTP_RETRY_BASE_SECONDS=0'], '/config/ALCARTA_SMTP_RETRY_BASE_SECONDS'],
      [['--set', 'config.ALCARTA_SMTP_RELAY_URL=smtp://relay:25'], "'ALCARTA_SMTP_RELAY_URL'"],
      [['--set', 'mail.service.type=ExternalName'], '/mail/service/type'],
      [['--set', 'mail.service.externalTrafficPolicy=Nearest'], '/mail/service/externalTrafficPolicy'],
      [['--set', 'mail.relay.url=http://relay.example.internal'], '/mail/relay/url'],
      [['--set', 'mail.dkim.selector=bad selector'], '/mail/dkim/selector'],
      [['--set-string', 'mail.dkim.privateKey=not a key'], '/mail/dkim/privateKey'],
    ];
    for (const [args, where] of cases) {
      const stderr = templateFails(...REQUIRED, ...args);
      assert.match(stderr, /schema/, `${args.join(' ')}: refused by the schema`);
      assert.ok(stderr.includes(where), `${args.join(' ')}: the error names ${where}:\n${stderr}`);
    }
  });

  it('refuses to render without the required values, naming them', () => {
    const image = ['--set', 'image.repository=registry.example.com/alcarta'];
    const host = ['--set', `ingress.host=${HOST}`];
    const db = ['--set', `database.url=${DATABASE_URL}`];
    assert.match(templateFails(...host, ...db), /image\.repository is required/);
    assert.match(templateFails(...image, ...host), /database\.url is required/);
    assert.match(templateFails(...image, ...db), /ingress\.host is required/);
    assert.match(templateFails(...REQUIRED, '--set', 'existingSecret=mine'), /existingSecret is set/);
  });

  it('builds an image whose CMD is `node dist/main.js`, the command the tests run', () => {
    // Instructions of the Dockerfile, continuation lines joined, comments dropped.
    const instructions = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8')
      .replace(/\\\n/g, ' ')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => {
        const space = l.indexOf(' ');
        return { op: l.slice(0, space).toUpperCase(), arg: l.slice(space + 1).trim() };
      });
    const lastFrom = instructions.map((i) => i.op).lastIndexOf('FROM');
    assert.ok(instructions.filter((i) => i.op === 'FROM').length >= 2, 'multi-stage build');
    const final = instructions.slice(lastFrom);
    const last = (op: string) => final.filter((i) => i.op === op).at(-1)?.arg;

    assert.deepEqual(JSON.parse(last('CMD') ?? 'null'), ['node', 'dist/main.js'], 'exec form, no shell or npm');
    assert.equal(last('ENTRYPOINT'), undefined, 'nothing wraps the CMD');
    assert.equal(last('WORKDIR'), '/app');
    assert.match(last('USER') ?? '', /^[1-9]\d*(:\d+)?$/, 'a numeric non-root user');
    assert.equal(last('EXPOSE'), '3000');
    assert.ok(final.some((i) => i.op === 'ENV' && /\bNODE_ENV=production\b/.test(i.arg)));
    assert.ok(
      final.some((i) => i.op === 'RUN' && /npm ci\b.*--omit=dev/.test(i.arg)),
      'production deps only',
    );
    assert.ok(final.some((i) => i.op === 'COPY' && /--from=\S+ \/app\/dist \.\/dist$/.test(i.arg)));

    // What the image runs relative to /app is what the tests run: the build's dist/main.js and
    // dist/cli.js (the Job's `node dist/cli.js migrate`), compiled from the src/main.ts and
    // src/cli.ts that the tests run from source (or, compiled, from dist/).
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8'));
    assert.equal(pkg.main, 'dist/main.js');
    const build = JSON.parse(readFileSync(join(REPO_ROOT, 'tsconfig.build.json'), 'utf8'));
    assert.deepEqual([build.compilerOptions.rootDir, build.compilerOptions.outDir], ['src', 'dist']);
    assert.ok(existsSync(join(REPO_ROOT, 'src', 'main.ts')));
    assert.ok(existsSync(join(REPO_ROOT, 'src', 'cli.ts')));

    const ignored = readFileSync(join(REPO_ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) =>
        l
          .trim()
          .replace(/^\*\*\//, '')
          .replace(/^\//, '')
          .replace(/\/$/, ''),
      );
    for (const path of ['node_modules', 'dist-test', '.alcarta', '.git', '.env']) {
      assert.ok(ignored.includes(path), `.dockerignore excludes ${path}`);
    }
  });
});
