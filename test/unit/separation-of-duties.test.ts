import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Caller } from '#app/kernel/caller.js';
import { principalId } from '#app/auth/oauth/principal-claims.js';
import { isRequester } from '#app/approvals/separation-of-duties.js';

const ISSUER = 'https://login.example.com';
const DECIDE = new Set(['approvals:decide'] as const);

/** An OAuth caller as the authenticator builds it: bound to its principal, iss + sub. */
function oauthCaller(subject: string, clientId: string | null): Caller {
  return new Caller(principalId(ISSUER, subject), DECIDE, ['*'], {
    principal: { issuer: ISSUER, subject, clientId, email: null },
  });
}

describe('isRequester: who counts as the credential that asked', () => {
  it('a static token by its token id', () => {
    const requester = { createdBy: 'tok_agent', requesterClientId: null };
    assert.equal(isRequester(new Caller('tok_agent', DECIDE, ['*']), requester), true);
    assert.equal(isRequester(new Caller('tok_person', DECIDE, ['*']), requester), false);
  });

  it('an OAuth principal by iss + sub, whatever client its token was issued to', () => {
    const requester = { createdBy: principalId(ISSUER, 'alice'), requesterClientId: 'mcp-remote-client' };
    assert.equal(isRequester(oauthCaller('alice', 'alcarta-console'), requester), true);
    assert.equal(isRequester(oauthCaller('bob', 'alcarta-console'), requester), false);
  });

  it('a client acting for itself (client credentials): no token issued to that client decides what it asked', () => {
    const requester = { createdBy: principalId(ISSUER, 'agent'), requesterClientId: 'agent' };
    assert.equal(isRequester(oauthCaller('agent', 'agent'), requester), true);
    assert.equal(isRequester(oauthCaller('alice', 'agent'), requester), true, "a person's token held by the agent");
    assert.equal(isRequester(oauthCaller('alice', 'alcarta-console'), requester), false);
  });

  it("the client of a person's request, acting for itself, does not decide it; other people using that client do", () => {
    const requester = { createdBy: principalId(ISSUER, 'alice'), requesterClientId: 'agent' };
    assert.equal(isRequester(oauthCaller('agent', 'agent'), requester), true);
    assert.equal(isRequester(oauthCaller('bob', 'agent'), requester), false);
  });

  it('a request made before clients were recorded is recognised by its principal alone', () => {
    const requester = { createdBy: principalId(ISSUER, 'agent'), requesterClientId: null };
    assert.equal(isRequester(oauthCaller('agent', 'agent'), requester), true);
    assert.equal(isRequester(oauthCaller('alice', 'agent'), requester), false);
  });
});
