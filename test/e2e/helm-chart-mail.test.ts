import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { helmBinary } from '../support/helm';
import {
  all,
  container,
  DKIM_KEY,
  envVar,
  Manifest,
  one,
  own,
  RELAY_URL,
  REQUIRED,
  secretRef,
  template,
  templateFails,
} from '../support/helm-chart';

/**
 * The mail parts of helm/alcarta (docs/mail.md, docs/operators.md "Kubernetes and Helm"), rendered
 * with a real Helm binary: the SMTP Service and port, the relay URL and DKIM key kept in a Secret
 * (never the ConfigMap), existing Secrets, and the values the chart refuses.
 */
describe('Helm chart helm/alcarta: mail', () => {
  let rendered: Manifest[];

  before(() => {
    helmBinary();
    rendered = template(...REQUIRED);
  });

  const smtpService = (manifests: Manifest[]) => one(manifests, 'Service', 'rel-alcarta-smtp');
  const mailSecret = (manifests: Manifest[]) => one(manifests, 'Secret', 'rel-alcarta-mail');
  const volume = (deployment: Manifest, name: string) =>
    (deployment.spec.template.spec.volumes as Manifest[]).find((v) => v.name === name);
  const mount = (deployment: Manifest, name: string) =>
    (container(deployment).volumeMounts as Manifest[]).find((m) => m.name === name);
  /** The file a mounted Secret key appears as in the container: mount path + item path. */
  const mountedFile = (deployment: Manifest, volumeName: string, key: string) => {
    const item = (volume(deployment, volumeName)?.secret.items as Manifest[]).find((i) => i.key === key);
    assert.ok(item, `${volumeName} mounts the key ${key}`);
    return `${mount(deployment, volumeName)!.mountPath}/${item.path}`;
  };

  it('exposes the SMTP port of the pods through a ClusterIP Service of its own by default', () => {
    const service = smtpService(rendered);
    assert.equal(service.spec.type, 'ClusterIP');
    assert.deepEqual(service.spec.ports, [{ name: 'smtp', port: 25, targetPort: 'smtp', protocol: 'TCP' }]);
    assert.equal(service.spec.externalTrafficPolicy, undefined, 'not valid on a ClusterIP Service');
    const podLabels = one(rendered, 'Deployment').spec.template.metadata.labels;
    for (const [key, value] of Object.entries(service.spec.selector)) assert.equal(podLabels[key], value);
    assert.equal(own(rendered, 'ConfigMap').data.ALCARTA_SMTP_PORT, '2525');

    // The probes stay on HTTP, and the grace period still covers preStop + drain.
    const c = container(one(rendered, 'Deployment'));
    assert.deepEqual(c.livenessProbe.httpGet, { path: '/health/live', port: 'http' });
    assert.deepEqual(c.readinessProbe.httpGet, { path: '/health/ready', port: 'http' });
    assert.ok(
      one(rendered, 'Deployment').spec.template.spec.terminationGracePeriodSeconds >
        10 + Number(own(rendered, 'ConfigMap').data.ALCARTA_SHUTDOWN_GRACE_SECONDS),
    );
  });

  it('makes the SMTP Service a LoadBalancer or NodePort for an MX, keeping client addresses for SPF', () => {
    const lb = smtpService(
      template(
        ...REQUIRED,
        '--set',
        'mail.service.type=LoadBalancer',
        '--set',
        'mail.service.loadBalancerSourceRanges={203.0.113.0/24}',
        '--set-string',
        'mail.service.annotations.service\\.beta\\.kubernetes\\.io/aws-load-balancer-type=nlb',
      ),
    );
    assert.equal(lb.spec.type, 'LoadBalancer');
    assert.equal(lb.spec.externalTrafficPolicy, 'Local');
    assert.deepEqual(lb.spec.loadBalancerSourceRanges, ['203.0.113.0/24']);
    assert.equal(lb.metadata.annotations['service.beta.kubernetes.io/aws-load-balancer-type'], 'nlb');

    const nodePort = smtpService(
      template(...REQUIRED, '--set', 'mail.service.type=NodePort', '--set', 'mail.service.nodePort=30025'),
    );
    assert.equal(nodePort.spec.type, 'NodePort');
    assert.deepEqual(nodePort.spec.ports, [
      { name: 'smtp', port: 25, targetPort: 'smtp', protocol: 'TCP', nodePort: 30025 },
    ]);
  });

  it('follows config.ALCARTA_SMTP_PORT, and renders no SMTP Service when disabled or off', () => {
    const moved = template(...REQUIRED, '--set', 'config.ALCARTA_SMTP_PORT=2626');
    assert.deepEqual(container(one(moved, 'Deployment')).ports[1], {
      name: 'smtp',
      containerPort: 2626,
      protocol: 'TCP',
    });
    assert.equal(own(moved, 'ConfigMap').data.ALCARTA_SMTP_PORT, '2626');

    const noService = template(...REQUIRED, '--set', 'mail.service.enabled=false');
    assert.deepEqual(
      all(noService, 'Service').map((s) => s.metadata.name),
      ['rel-alcarta'],
    );
    assert.equal(container(one(noService, 'Deployment')).ports.length, 2, 'the pods still listen');

    for (const off of [
      ['--set', 'config.ALCARTA_SMTP_PORT=off'],
      ['--set', 'config.ALCARTA_SMTP_PORT=false'],
    ]) {
      const manifests = template(...REQUIRED, ...off);
      assert.deepEqual(
        all(manifests, 'Service').map((s) => s.metadata.name),
        ['rel-alcarta'],
      );
      assert.deepEqual(
        container(one(manifests, 'Deployment')).ports.map((p: Manifest) => p.name),
        ['http'],
      );
      assert.equal(own(manifests, 'ConfigMap').data.ALCARTA_SMTP_PORT, 'off');
    }
  });

  it("takes the relay URL from a Secret: the chart's own from mail.relay.url, or an existing one", () => {
    const c = container(one(rendered, 'Deployment'));
    assert.equal(envVar(c, 'ALCARTA_SMTP_RELAY_URL'), undefined, 'no relay by default (not_configured)');
    assert.deepEqual(
      all(rendered, 'Secret')
        .map((s) => s.metadata.name)
        .sort(),
      ['rel-alcarta', 'rel-alcarta-migrate'],
    );

    const fromValues = template(...REQUIRED, '--set', `mail.relay.url=${RELAY_URL}`);
    const secret = mailSecret(fromValues);
    assert.deepEqual(secret.stringData, { ALCARTA_SMTP_RELAY_URL: RELAY_URL });
    const deployment = one(fromValues, 'Deployment');
    assert.deepEqual(secretRef(container(deployment), 'ALCARTA_SMTP_RELAY_URL'), {
      name: 'rel-alcarta-mail',
      key: 'ALCARTA_SMTP_RELAY_URL',
    });
    assert.equal(own(fromValues, 'ConfigMap').data.ALCARTA_SMTP_RELAY_URL, undefined, 'never in the ConfigMap');
    const job = one(fromValues, 'Job').spec.template.spec.containers[0];
    assert.equal(envVar(job, 'ALCARTA_SMTP_RELAY_URL'), undefined, 'the migration Job does not get it');
    assert.notEqual(
      deployment.spec.template.metadata.annotations['checksum/mail'],
      one(rendered, 'Deployment').spec.template.metadata.annotations['checksum/mail'],
      'a new relay URL rolls the pods',
    );

    const existing = template(
      ...REQUIRED,
      '--set',
      'mail.relay.existingSecret=corp-relay',
      '--set',
      'mail.relay.existingSecretKey=url',
    );
    assert.deepEqual(
      all(existing, 'Secret').filter((s) => s.metadata.name === 'rel-alcarta-mail'),
      [],
    );
    assert.deepEqual(secretRef(container(one(existing, 'Deployment')), 'ALCARTA_SMTP_RELAY_URL'), {
      name: 'corp-relay',
      key: 'url',
    });
  });

  it('mounts the DKIM private key from a Secret as the file ALCARTA_DKIM_PRIVATE_KEY_FILE names', () => {
    assert.equal(own(rendered, 'ConfigMap').data.ALCARTA_DKIM_PRIVATE_KEY_FILE, '', 'no DKIM by default');
    assert.equal(volume(one(rendered, 'Deployment'), 'dkim'), undefined);

    const fromValues = template(
      ...REQUIRED,
      '--set',
      'mail.dkim.selector=alcarta2026',
      '--set-string',
      `mail.dkim.privateKey=${DKIM_KEY}`,
    );
    assert.equal(mailSecret(fromValues).stringData['dkim-private-key.pem'], DKIM_KEY);
    const deployment = one(fromValues, 'Deployment');
    const data = own(fromValues, 'ConfigMap').data;
    assert.equal(data.ALCARTA_DKIM_SELECTOR, 'alcarta2026');
    assert.equal(volume(deployment, 'dkim')!.secret.secretName, 'rel-alcarta-mail');
    assert.equal(mountedFile(deployment, 'dkim', 'dkim-private-key.pem'), data.ALCARTA_DKIM_PRIVATE_KEY_FILE);
    assert.equal(data.ALCARTA_DKIM_PRIVATE_KEY_FILE, '/etc/alcarta/dkim/private.pem');
    assert.equal(mount(deployment, 'dkim')!.readOnly, true);
    assert.equal(volume(deployment, 'dkim')!.secret.defaultMode, 0o440);

    const existing = template(
      ...REQUIRED,
      '--set',
      'mail.dkim.selector=s1',
      '--set',
      'mail.dkim.existingSecret=corp-dkim',
      '--set',
      'mail.dkim.existingSecretKey=key.pem',
    );
    const existingDeployment = one(existing, 'Deployment');
    assert.deepEqual(
      all(existing, 'Secret').filter((s) => s.metadata.name === 'rel-alcarta-mail'),
      [],
    );
    assert.equal(volume(existingDeployment, 'dkim')!.secret.secretName, 'corp-dkim');
    assert.equal(
      mountedFile(existingDeployment, 'dkim', 'key.pem'),
      own(existing, 'ConfigMap').data.ALCARTA_DKIM_PRIVATE_KEY_FILE,
    );
  });

  it('mounts the STARTTLS certificate and key from a TLS Secret', () => {
    const data = own(rendered, 'ConfigMap').data;
    assert.deepEqual([data.ALCARTA_SMTP_TLS_CERT_FILE, data.ALCARTA_SMTP_TLS_KEY_FILE], ['', '']);
    const manifests = template(...REQUIRED, '--set', 'mail.tls.secretName=smtp-example-com');
    const deployment = one(manifests, 'Deployment');
    const config = own(manifests, 'ConfigMap').data;
    assert.equal(volume(deployment, 'smtp-tls')!.secret.secretName, 'smtp-example-com');
    assert.equal(mountedFile(deployment, 'smtp-tls', 'tls.crt'), config.ALCARTA_SMTP_TLS_CERT_FILE);
    assert.equal(mountedFile(deployment, 'smtp-tls', 'tls.key'), config.ALCARTA_SMTP_TLS_KEY_FILE);
    assert.equal(mount(deployment, 'smtp-tls')!.readOnly, true);
  });

  it('takes the other SMTP settings as values', () => {
    const data = own(
      template(
        ...REQUIRED,
        '--set',
        'config.ALCARTA_SMTP_AUTH=required',
        '--set',
        'config.ALCARTA_SMTP_MAX_CLIENTS=20',
        '--set',
        'config.ALCARTA_MAIL_AUTH=false',
        '--set',
        'config.ALCARTA_SMTP_HOSTNAME=mx.example.com',
        '--set',
        'config.ALCARTA_SMTP_RETRY_MAX_SECONDS=3600',
        '--set',
        'config.ALCARTA_SMTP_RETRY_BASE_SECONDS=10',
        '--set',
        'config.ALCARTA_OUTBOX_LEASE_SECONDS=60',
      ),
      'ConfigMap',
    ).data;
    assert.deepEqual(
      [
        data.ALCARTA_SMTP_AUTH,
        data.ALCARTA_SMTP_MAX_CLIENTS,
        data.ALCARTA_MAIL_AUTH,
        data.ALCARTA_SMTP_HOSTNAME,
        data.ALCARTA_SMTP_RETRY_MAX_SECONDS,
        data.ALCARTA_SMTP_RETRY_BASE_SECONDS,
        data.ALCARTA_OUTBOX_LEASE_SECONDS,
      ],
      ['required', '20', 'off', 'mx.example.com', '3600', '10', '60'],
    );
  });

  it('refuses contradictory or incomplete mail values, naming them', () => {
    const relayBoth = ['--set', `mail.relay.url=${RELAY_URL}`, '--set', 'mail.relay.existingSecret=corp-relay'];
    assert.match(templateFails(...REQUIRED, ...relayBoth), /mail\.relay: set url or existingSecret, not both/);
    const keyBoth = [
      '--set',
      'mail.dkim.selector=s1',
      '--set-string',
      `mail.dkim.privateKey=${DKIM_KEY}`,
      '--set',
      'mail.dkim.existingSecret=corp-dkim',
    ];
    assert.match(templateFails(...REQUIRED, ...keyBoth), /mail\.dkim: set privateKey or existingSecret, not both/);
    assert.match(
      templateFails(...REQUIRED, '--set', 'mail.dkim.existingSecret=corp-dkim'),
      /mail\.dkim\.selector is required with a DKIM key/,
    );
    assert.match(
      templateFails(...REQUIRED, '--set', 'mail.dkim.selector=s1'),
      /mail\.dkim\.selector is set without a key/,
    );
  });
});
