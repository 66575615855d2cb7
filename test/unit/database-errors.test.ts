import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DatabaseError } from 'pg';
import { QueryFailedError, QueryRunnerAlreadyReleasedError, QueryRunnerProviderAlreadyReleasedError } from 'typeorm';
import { AlcartaError } from '#app/kernel/errors.js';
import { classifyDatabaseError, clientFacingError } from '#app/database/database-errors.js';
import { protocolErrorOf, requestIdOf, SERVER_ERROR } from '#app/kernel/json-rpc.js';

/** A pg error as PostgreSQL sends it (severity, SQLSTATE), wrapped as TypeORM throws it. */
function postgresError(code: string, message: string, severity = 'ERROR'): QueryFailedError {
  const error = new DatabaseError(message, 0, 'error');
  error.code = code;
  error.severity = severity;
  return new QueryFailedError('SELECT 1', [], error);
}

function socketError(code: string): Error {
  return Object.assign(new Error(`${code} 127.0.0.1:5432`), { code });
}

describe('database errors', () => {
  it('counts every way of losing the connection as unavailable', () => {
    const lost: Array<[string, unknown]> = [
      ['a query runner released under a transaction', new QueryRunnerAlreadyReleasedError()],
      ['a transaction on a released query runner', new QueryRunnerProviderAlreadyReleasedError()],
      ['admin shutdown (fast stop, pg_terminate_backend)', postgresError('57P01', 'terminating connection', 'FATAL')],
      ['crash shutdown (immediate stop)', postgresError('57P02', 'terminating connection', 'FATAL')],
      ['cannot connect now (starting up)', postgresError('57P03', 'the database system is starting up', 'FATAL')],
      ['a connection exception', postgresError('08006', 'connection failure')],
      ['too many connections', postgresError('53300', 'sorry, too many clients already', 'FATAL')],
      ['a write on a server that became a standby', postgresError('25006', 'read-only transaction')],
      ['refused', socketError('ECONNREFUSED')],
      ['reset', socketError('ECONNRESET')],
      ['a write to a closed socket', socketError('ERR_STREAM_DESTROYED')],
      ['terminated', new QueryFailedError('SELECT 1', [], new Error('Connection terminated unexpectedly'))],
      ['a pool that timed out', new Error('timeout exceeded when trying to connect')],
      ['an ended client', new Error('Client was closed and is not queryable')],
    ];
    for (const [what, err] of lost) {
      assert.equal(classifyDatabaseError(err), 'unavailable', what);
      const answer = clientFacingError(err);
      assert.equal(answer?.code, 'unavailable', what);
      assert.equal(answer?.reason, 'database_unavailable', what);
    }
  });

  it('tells values PostgreSQL cannot store from outages, and leaves bugs alone', () => {
    assert.equal(classifyDatabaseError(postgresError('22021', 'invalid byte sequence')), 'invalid_input');
    assert.equal(classifyDatabaseError(postgresError('54000', 'index row size exceeds maximum')), 'invalid_input');
    assert.equal(
      classifyDatabaseError(postgresError('08P01', 'bind message has 70000 parameter formats')),
      'invalid_input',
    );
    for (const bug of [postgresError('42703', 'column does not exist'), new TypeError('x is undefined'), 'a string']) {
      assert.equal(classifyDatabaseError(bug), undefined, String(bug));
      assert.equal(clientFacingError(bug), undefined, String(bug));
    }
    const known = new AlcartaError('not_found', 'task_not_found', 'Task not found: t');
    assert.equal(clientFacingError(known), known);
  });

  it('answers unavailable as the JSON-RPC server error -32000 with the error body, never -32603', () => {
    const unavailable = clientFacingError(socketError('ECONNREFUSED'))!;
    assert.deepEqual(protocolErrorOf(unavailable), {
      code: SERVER_ERROR,
      message: unavailable.message,
      data: unavailable.toBody(),
    });
    assert.equal(protocolErrorOf(new AlcartaError('not_found', 'task_not_found', 'x')).code, -32602);
  });

  it('reads the id of one JSON-RPC request, and null for anything else', () => {
    assert.equal(requestIdOf({ jsonrpc: '2.0', id: 7, method: 'tools/list' }), 7);
    assert.equal(requestIdOf({ jsonrpc: '2.0', id: 'a', method: 'tools/call' }), 'a');
    for (const other of [
      [{ jsonrpc: '2.0', id: 1, method: 'tools/list' }],
      { jsonrpc: '2.0', method: 'notifications/cancelled' },
      { jsonrpc: '2.0', id: 3, result: {} },
      { jsonrpc: '2.0', id: { nested: true }, method: 'tools/list' },
      { jsonrpc: '2.0', id: null, method: 'tools/list' },
      'text',
      undefined,
    ]) {
      assert.equal(requestIdOf(other), null, JSON.stringify(other));
    }
  });
});
