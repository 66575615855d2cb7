import 'reflect-metadata';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AlcartaError } from '#app/kernel/errors.js';
import { Caller, OAuthPrincipal } from '#app/kernel/caller.js';
import {
  addApproval,
  APPROVAL_BY_ADDRESS,
  escalationTime,
  judgeRecipients,
  mayDecide,
  NO_POLICY,
  preparePolicy,
  RecordedApproval,
} from '#app/approvals/approval-policy.js';

const MAX = 7 * 24 * 3600;

function policy(
  input: Parameters<typeof preparePolicy>[0] extends infer T
    ? Omit<T, 'maxExpirySeconds' | 'defaultExpirySeconds'>
    : never,
) {
  return preparePolicy({ ...input, defaultExpirySeconds: 24 * 3600, maxExpirySeconds: MAX });
}

function refusedField(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof AlcartaError);
    assert.equal(err.reason, 'invalid_policy');
    return String(err.details.field);
  }
  assert.fail('not refused');
}

function person(principal: Partial<OAuthPrincipal>, id = 'prn_1'): Caller {
  return new Caller(id, new Set(['approvals:decide']), ['*'], {
    principal: { issuer: 'https://idp.example', subject: 's', clientId: null, email: null, ...principal },
  });
}

describe('approval policy', () => {
  it('defaults every field, and keeps addresses and domains lower-case, each once', () => {
    assert.deepEqual(policy({}), NO_POLICY);
    const p = policy({
      approvers: ['email:Ann@Example.com', 'email:ann@example.com', 'sub:Bob', 'tok_abc'],
      recipients: { allow: ['@Example.com', 'Partner.example'], block: ['rival.example', 'x@Other.example'] },
    });
    assert.deepEqual(p.approvers, ['email:ann@example.com', 'sub:Bob', 'tok_abc']);
    assert.deepEqual(p.recipients.allow, ['example.com', 'partner.example']);
    assert.deepEqual(p.recipients.block, ['rival.example', 'x@other.example']);
  });

  it('refuses an escalation later than the default expiry of requests when the policy sets none', () => {
    assert.equal(
      refusedField(() => policy({ escalate_after_seconds: 2 * 24 * 3600, escalate_to: ['boss@example.com'] })),
      'escalate_after_seconds',
    );
    const p = policy({ escalate_after_seconds: 23 * 3600, escalate_to: ['boss@example.com'] });
    assert.equal(p.escalateAfterSeconds, 23 * 3600);
  });

  it('refuses each inconsistent or malformed field, naming it', () => {
    assert.equal(
      refusedField(() => policy({ approvers: ['alice'] })),
      'approvers',
    );
    assert.equal(
      refusedField(() => policy({ approvers: ['email:not-an-address'] })),
      'approvers',
    );
    assert.equal(
      refusedField(() => policy({ approvers: [] })),
      'approvers',
    );
    assert.equal(
      refusedField(() => policy({ approvers: ['sub:a'], quorum: 2 })),
      'quorum',
    );
    assert.equal(
      refusedField(() => policy({ expires_after_seconds: MAX + 1 })),
      'expires_after_seconds',
    );
    // Escalation needs both when and to whom: the one missing is named.
    assert.equal(
      refusedField(() => policy({ escalate_after_seconds: 600 })),
      'escalate_to',
    );
    assert.equal(
      refusedField(() => policy({ escalate_to: ['boss@example.com'] })),
      'escalate_after_seconds',
    );
    assert.equal(
      refusedField(() => policy({ escalate_after_seconds: 600, escalate_to: ['boss'] })),
      'escalate_to',
    );
    assert.equal(
      refusedField(() =>
        policy({ expires_after_seconds: 600, escalate_after_seconds: 600, escalate_to: ['boss@example.com'] }),
      ),
      'escalate_after_seconds',
    );
    assert.equal(
      refusedField(() => policy({ recipients: { allow: ['not a domain'] } })),
      'recipients.allow',
    );
    assert.equal(
      refusedField(() => policy({ recipients: { block: ['localhost'] } })),
      'recipients.block',
    );
    assert.equal(
      refusedField(() => policy({ recipients: { allow: ['a.example'], block: ['A.example'] } })),
      'recipients',
    );
    assert.equal(
      refusedField(() => policy({ recipients: { auto_approve: true } })),
      'recipients.auto_approve',
    );
  });

  it('lets anyone decide without a list, and with one only who it names, by each kind of entry', () => {
    const token = new Caller('tok_abc', new Set(['approvals:decide']), ['*']);
    assert.ok(mayDecide(NO_POLICY, token));
    const p = policy({ approvers: ['tok_abc', 'sub:s1', 'client:c1', 'group:finance', 'email:ann@example.com'] });
    assert.ok(mayDecide(p, token));
    assert.ok(!mayDecide(p, new Caller('tok_other', new Set(['approvals:decide']), ['*'])));
    assert.ok(mayDecide(p, person({ subject: 's1' })));
    assert.ok(mayDecide(p, person({ clientId: 'c1' })));
    assert.ok(mayDecide(p, person({ groups: ['staff', 'finance'] })));
    assert.ok(mayDecide(p, person({ email: 'Ann@Example.com' })));
    assert.ok(!mayDecide(p, person({ subject: 's2', groups: ['staff'], email: 'bob@example.com' })));
    // A principal whose binding id happens to be listed as a token is not that token.
    assert.ok(!mayDecide(p, person({ subject: 'x' }, 'tok_abc')));
    // An approval link carries an address only: its "subject" is the address, never an IdP's.
    const link = (address: string) => person({ issuer: APPROVAL_BY_ADDRESS, subject: address, email: address });
    assert.ok(mayDecide(p, link('ann@example.com')));
    assert.ok(!mayDecide(policy({ approvers: ['sub:ann@example.com'] }), link('ann@example.com')));
  });

  it('counts distinct approvers up to the quorum; the same person twice is a conflict', () => {
    const request = { id: 'chk_1', quorum: 2, approvals: [] as RecordedApproval[] };
    const at = '2026-12-04T10:00:00.000Z';
    assert.equal(addApproval(request, { by: 'ann@example.com', at, reason: null }), 'recorded');
    assert.throws(
      () => addApproval(request, { by: 'ANN@example.com', at, reason: 'again' }),
      (err: AlcartaError) => err.reason === 'already_approved' && err.details.approvals === 1,
    );
    assert.equal(addApproval(request, { by: 'bob@example.com', at, reason: 'ok' }), 'quorum_reached');
    assert.deepEqual(
      request.approvals.map((a) => a.by),
      ['ann@example.com', 'bob@example.com'],
    );
    const single = { id: 'chk_2', quorum: 1, approvals: [] as RecordedApproval[] };
    assert.equal(addApproval(single, { by: 'ann@example.com', at, reason: null }), 'quorum_reached');
    assert.deepEqual(single.approvals, []);
  });

  it('blocks by address or domain with its subdomains; auto-approves only when every recipient is allowed', () => {
    const p = policy({
      recipients: { allow: ['example.com', 'partner@ally.example'], block: ['rival.example'], auto_approve: true },
    });
    assert.deepEqual(judgeRecipients(p, ['a@example.com', 'b@mail.Rival.example']), {
      blocked: ['b@mail.Rival.example'],
    });
    assert.deepEqual(judgeRecipients(p, ['x@notrival.example']), { autoApprove: false });
    assert.deepEqual(judgeRecipients(p, ['a@Example.com', 'c@eu.example.com', 'partner@ally.example']), {
      autoApprove: true,
    });
    assert.deepEqual(judgeRecipients(p, ['a@example.com', 'other@ally.example']), { autoApprove: false });
    const noAuto = policy({ recipients: { allow: ['example.com'] } });
    assert.deepEqual(judgeRecipients(noAuto, ['a@example.com']), { autoApprove: false });
  });

  it('escalates after the policy time, and never at or after the expiry', () => {
    const created = new Date('2026-12-04T10:00:00.000Z');
    const expires = new Date('2026-12-04T11:00:00.000Z');
    const p = policy({ escalate_after_seconds: 600, escalate_to: ['boss@example.com'] });
    assert.equal(escalationTime(p, created, expires)?.toISOString(), '2026-12-04T10:10:00.000Z');
    assert.equal(escalationTime(p, created, new Date('2026-12-04T10:10:00.000Z')), null);
    assert.equal(escalationTime(NO_POLICY, created, expires), null);
  });
});
