import { AlcartaError } from '../common/errors';

/**
 * What a failed database call means for the client that caused it. The services prevent these
 * errors where they can (input is checked before it reaches SQL); this is the backstop that keeps
 * the rest from becoming a 500:
 *  - `unavailable`: PostgreSQL cannot be reached or is shutting down → 503 with Retry-After;
 *  - `invalid_input`: the value itself cannot be stored (a NUL byte, a row too big for an index,
 *    too many bind parameters) → 400 invalid_request.
 * Anything else is a bug of ours and stays a 500 (logged without query parameters).
 */
export type DatabaseFailure = 'unavailable' | 'invalid_input';

/** Connection-level failures of `pg` and the network, before PostgreSQL answered anything. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
]);

/** Messages `pg` and its pool use when a connection is lost or cannot be had in time. */
const CONNECTION_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  // pg's Client when its own connect timeout (CONNECT_TIMEOUT_MS) destroys the socket.
  'timeout expired',
  'Client has encountered a connection error',
  'Connection terminated unexpectedly',
  'Cannot use a pool after calling end',
  'Client was closed and is not queryable',
  'the database system is',
];

export function classifyDatabaseError(err: unknown): DatabaseFailure | undefined {
  const chain: unknown[] = [];
  for (let e: unknown = err, depth = 0; e && depth < 5; depth++) {
    chain.push(e);
    e = (e as { driverError?: unknown; cause?: unknown }).driverError ?? (e as { cause?: unknown }).cause;
  }
  for (const e of chain) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (NETWORK_CODES.has(code)) return 'unavailable';
      // A protocol violation is a statement PostgreSQL refused to bind (more than 65535 parameters).
      if (code === '08P01') return 'invalid_input';
      // 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown, cannot connect now.
      if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return 'unavailable';
      // 22: data exception (NUL byte 22P05/22021, value too long 22001); 54: program limit exceeded
      // (index row size, too many bind parameters).
      if (code.startsWith('22') || code.startsWith('54')) return 'invalid_input';
    }
    const message = (e as { message?: unknown }).message;
    if (typeof message === 'string' && CONNECTION_MESSAGES.some((m) => message.includes(m))) return 'unavailable';
  }
  return undefined;
}

/**
 * The client-facing error for a classified database failure (REST body, MCP tool error), or
 * undefined for anything else.
 */
export function databaseFailureError(err: unknown): AlcartaError | undefined {
  switch (classifyDatabaseError(err)) {
    case 'unavailable':
      return new AlcartaError('unavailable', 'database_unavailable', 'The database is unreachable; retry shortly.');
    case 'invalid_input':
      return new AlcartaError('invalid_request', 'invalid_input', 'A value in this request cannot be stored.');
    default:
      return undefined;
  }
}
