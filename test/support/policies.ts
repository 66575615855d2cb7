/** A valid policy with every field set: the one refused changes must leave as it is. */
export const GOOD_POLICY = {
  approvers: ['tok_first', 'email:boss@example.com'],
  quorum: 2,
  expires_after_seconds: 7200,
  escalate_after_seconds: 600,
  escalate_to: ['oncall@example.com'],
  recipients: { allow: ['partner.example'], block: ['rival.example'], auto_approve: false },
};

/**
 * Bad policies, each with the field its refusal must name and the reason: `invalid_policy` from the
 * policy's own rules, or the body checks (unknown_field, invalid_field) for wrong types and ranges.
 */
export const BAD_POLICIES: Array<{ what: string; body: Record<string, unknown>; field: string; reason: string }> = [
  { what: 'an approver of no known kind', body: { approvers: ['bob'] }, field: 'approvers', reason: 'invalid_policy' },
  {
    what: 'an email approver that is no address',
    body: { approvers: ['email:not-an-address'] },
    field: 'approvers',
    reason: 'invalid_policy',
  },
  { what: 'an empty approver list', body: { approvers: [] }, field: 'approvers', reason: 'invalid_policy' },
  { what: 'an approver that is no string', body: { approvers: [42] }, field: 'approvers', reason: 'invalid_field' },
  {
    what: 'a quorum above the approvers',
    body: { approvers: ['tok_a', 'tok_b'], quorum: 3 },
    field: 'quorum',
    reason: 'invalid_policy',
  },
  { what: 'quorum 0', body: { quorum: 0 }, field: 'quorum', reason: 'invalid_field' },
  { what: 'quorum 21', body: { quorum: 21 }, field: 'quorum', reason: 'invalid_field' },
  {
    what: 'escalate_after_seconds without escalate_to',
    body: { escalate_after_seconds: 600 },
    field: 'escalate_to',
    reason: 'invalid_policy',
  },
  {
    what: 'escalate_to without escalate_after_seconds',
    body: { escalate_to: ['oncall@example.com'] },
    field: 'escalate_after_seconds',
    reason: 'invalid_policy',
  },
  {
    what: 'escalation not before expiry',
    body: { expires_after_seconds: 3600, escalate_after_seconds: 3600, escalate_to: ['oncall@example.com'] },
    field: 'escalate_after_seconds',
    reason: 'invalid_policy',
  },
  {
    what: 'an allow entry that is neither address nor domain',
    body: { recipients: { allow: ['not a domain'] } },
    field: 'recipients.allow',
    reason: 'invalid_policy',
  },
  {
    what: 'a block entry without a dot',
    body: { recipients: { block: ['localhost'] } },
    field: 'recipients.block',
    reason: 'invalid_policy',
  },
  {
    what: 'the same entry on allow and block',
    body: { recipients: { allow: ['Partner.example'], block: ['partner.example'] } },
    field: 'recipients',
    reason: 'invalid_policy',
  },
  {
    what: 'auto_approve without an allow list',
    body: { recipients: { auto_approve: true } },
    field: 'recipients.auto_approve',
    reason: 'invalid_policy',
  },
  { what: 'an unknown field', body: { colour: 'red' }, field: 'colour', reason: 'unknown_field' },
  {
    what: 'an unknown recipients field',
    body: { recipients: { deny: ['x.example'] } },
    field: 'recipients.deny',
    reason: 'unknown_field',
  },
];
