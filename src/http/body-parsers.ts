import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import express, { NextFunction, Request, RequestHandler, Response } from 'express';
import { findJsonProblem, invalidCharacters, MAX_JSON_DEPTH } from '../common/text-safety';
import { AppConfig } from '../config/app-config';
import { isMcpPath, refusalOf } from '../kernel/json-rpc';

const INGEST_PATH = /^\/v1\/mailboxes\/[^/]+\/messages\/?$/;

interface BodyParserError {
  type?: string;
  status?: number;
  limit?: number;
}

/**
 * One body parser per kind of route, with the size limits of the REST API (docs/rest-api.md):
 * ingest takes JSON or raw `message/rfc822` up to ALCARTA_MAX_INGEST_BYTES, everything else JSON up
 * to ALCARTA_MAX_BODY_BYTES. Parser failures are answered here, in the dialect of the route
 * (JSON-RPC for /mcp), instead of reaching Express's default HTML error page.
 *
 * Before routing, a parsed JSON body is also checked for what no handler should meet
 * (docs/operators.md, "Limits and hardening"): nesting deeper than MAX_JSON_DEPTH
 * (class-transformer and the validators recurse), and, on REST routes, text PostgreSQL cannot store
 * (NUL, lone surrogates) in any value or key, and in the query string. On /mcp the text is checked
 * per tool call instead, so the answer can be a tool error.
 */
export function bodyParsers(config: AppConfig): RequestHandler {
  const json = express.json({ limit: config.maxBodyBytes });
  const ingest = [
    express.json({ limit: config.maxIngestBytes }),
    express.raw({ type: 'message/rfc822', limit: config.maxIngestBytes }),
  ];
  return (req: Request, res: Response, next: NextFunction) => {
    const parsers = req.method === 'POST' && INGEST_PATH.test(req.path) ? ingest : [json];
    const runFrom = (i: number) => {
      if (i === parsers.length) return inspect(req, res, next);
      parsers[i](req, res, (err?: unknown) => (err ? reject(req, res, err) : runFrom(i + 1)));
    };
    runFrom(0);
  };
}

function inspect(req: Request, res: Response, next: NextFunction): void {
  const mcp = isMcpPath(req.path);
  const body: unknown = req.body;
  const problem =
    typeof body === 'object' && body !== null && !Buffer.isBuffer(body)
      ? findJsonProblem(body, { checkText: !mcp })
      : undefined;
  if (problem?.kind === 'too_deep') {
    const message = `The request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels.`;
    if (mcp) {
      res.status(400).json(refusalOf(body, ErrorCode.InvalidRequest, `Invalid Request: ${message}`));
      return;
    }
    res.status(400).json({ error: 'invalid_request', reason: 'too_deeply_nested', message });
    return;
  }
  if (problem?.kind === 'invalid_characters') {
    res.status(400).json(invalidCharacters(problem.path, 'field').toBody());
    return;
  }
  const query = mcp ? undefined : findJsonProblem(req.query, { checkText: true });
  if (query) {
    const error = invalidCharacters(query.path, 'field');
    res.status(400).json({ ...error.toBody(), message: `The query parameter ${error.message}` });
    return;
  }
  next();
}

function reject(req: Request, res: Response, err: BodyParserError): void {
  const tooLarge = err.type === 'entity.too.large';
  const malformed = err.type === 'entity.parse.failed';
  const status = tooLarge ? 413 : malformed ? 400 : err.status && err.status < 500 ? err.status : 400;
  const message = tooLarge
    ? `The request body is larger than the limit of ${err.limit} bytes.`
    : malformed
      ? 'The request body is not valid JSON.'
      : 'The request body could not be read.';
  if (isMcpPath(req.path)) {
    // Nothing was parsed: no id to answer to.
    const error = malformed
      ? refusalOf(undefined, ErrorCode.ParseError, 'Parse error')
      : refusalOf(undefined, ErrorCode.InvalidRequest, message);
    res.status(status).json(error);
    return;
  }
  const reason = tooLarge ? 'body_too_large' : malformed ? 'malformed_json' : 'unreadable_body';
  res.status(status).json({ error: 'invalid_request', reason, message });
}
