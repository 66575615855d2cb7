import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  DEFAULT_REVISION,
  LATEST_REVISION,
  revisionOf,
  SUPPORTED_REVISIONS,
  TASKS_REVISION,
} from '#app/mcp/protocol-revision.js';

const initialize = (protocolVersion: unknown) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion },
});
const toolsList = { jsonrpc: '2.0', id: 2, method: 'tools/list' };

describe('protocol revision of a request', () => {
  it('initialize gets the client’s revision when supported, else the latest (whatever the header says)', () => {
    for (const revision of SUPPORTED_REVISIONS) assert.equal(revisionOf(initialize(revision), undefined), revision);
    assert.equal(revisionOf(initialize('2024-11-05'), '2025-06-18'), LATEST_REVISION);
    assert.equal(revisionOf(initialize(42), undefined), LATEST_REVISION);
    assert.equal(revisionOf({ jsonrpc: '2.0', id: 1, method: 'initialize' }, undefined), LATEST_REVISION);
  });

  it('other requests speak the MCP-Protocol-Version header, 2025-03-26 without one', () => {
    assert.equal(revisionOf(toolsList, '2025-06-18'), '2025-06-18');
    assert.equal(revisionOf(toolsList, ['2025-11-25', '2025-03-26']), '2025-11-25');
    assert.equal(revisionOf(toolsList, undefined), DEFAULT_REVISION);
    assert.equal(DEFAULT_REVISION, '2025-03-26');
  });

  it('an unsupported header is undefined (the endpoint answers 400); so is a batch with one', () => {
    assert.equal(revisionOf(toolsList, '2024-11-05'), undefined);
    assert.equal(revisionOf(toolsList, ''), undefined);
    assert.equal(revisionOf([initialize('2025-06-18')], 'nonsense'), undefined, 'a batch is not an initialize');
  });

  it('tasks arrive with the latest revision', () => {
    assert.equal(TASKS_REVISION, '2025-11-25');
    assert.ok(SUPPORTED_REVISIONS.includes(TASKS_REVISION));
  });
});
