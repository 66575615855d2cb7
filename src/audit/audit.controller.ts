import { Controller, Get, Query, Res } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Response } from 'express';
import { DataSource } from 'typeorm';
import { Caller } from '../kernel/caller';
import { AlcartaError, invalidRequest } from '../kernel/errors';
import { CurrentCaller, RequireScopes } from '../kernel/route-decorators';
import { entriesAfter, RowQuery } from './audit-rows';

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;

/**
 * `GET /v1/audit?since=<cursor>&limit=`: entries after the cursor, one JSON object a line. The
 * cursor is an entry's `seq`; `Alcarta-Audit-Cursor` names the one to pass next (the last entry's,
 * or `since` when nothing followed), so paging skips and repeats nothing.
 */
@Controller('v1/audit')
@RequireScopes('admin')
export class AuditController {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  @Get()
  async list(
    @CurrentCaller() caller: Caller,
    @Query('since') sinceText: string | undefined,
    @Query('limit') limitText: string | undefined,
    @Res() res: Response,
  ): Promise<void> {
    // The trail covers every mailbox, so an admin bound to some of them does not read it.
    if (!caller.mailboxAccess.all) {
      throw new AlcartaError(
        'forbidden',
        'mailbox_out_of_reach',
        'Only an admin token bound to "*" reads the audit trail.',
      );
    }
    const since = integerParameter(sinceText, 'cursor', 0, Number.MAX_SAFE_INTEGER) ?? 0;
    const limit = integerParameter(limitText, 'limit', 1, MAX_LIMIT) ?? DEFAULT_LIMIT;
    const query: RowQuery = (sql, params) => this.dataSource.query(sql, params);
    const entries = await entriesAfter(query, since, limit);
    res.setHeader('Content-Type', 'application/x-ndjson; charset=utf-8');
    res.setHeader('Alcarta-Audit-Cursor', String(entries.at(-1)?.seq ?? since));
    res.status(200).end(entries.map((entry) => `${JSON.stringify(entry)}\n`).join(''));
  }
}

function integerParameter(text: string | undefined, name: string, min: number, max: number): number | undefined {
  if (text === undefined || text === '') return undefined;
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < min || value > max) {
    throw invalidRequest(`invalid_${name}`, `${name} must be an integer from ${min} to ${max}.`, { field: name });
  }
  return value;
}
