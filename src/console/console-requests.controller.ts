import { Body, Controller, Get, Param, Post, Query, Req, Res, UseFilters, UseGuards } from '@nestjs/common';
import { Request, Response } from 'express';
import { Public } from '../kernel/route-decorators';
import { PathId } from '../http/validation';
import { ConsoleExceptionFilter } from './console-exception.filter';
import { ConsolePendingFeedService } from './console-pending-feed.service';
import { ConsoleSessionGuard, CurrentSession } from './console-session.guard';
import { ActiveSession } from './console-session.service';
import {
  ConsoleDecision,
  ConsoleRequestsService,
  DECIDED_STATES,
  DECISION_OUTCOMES,
  DecisionOutcome,
} from './console-requests.service';
import { ConsoleViews } from './console-views';

/** A single text query parameter; an empty one (the "all" choice of a filter) counts as absent. */
function textParam(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** The pages of the people who decide: pending requests, one request, history. */
@Controller('console')
@Public()
@UseGuards(ConsoleSessionGuard)
@UseFilters(ConsoleExceptionFilter)
export class ConsoleRequestsController {
  constructor(
    private readonly requests: ConsoleRequestsService,
    private readonly feed: ConsolePendingFeedService,
    private readonly views: ConsoleViews,
  ) {}

  @Get()
  async pending(@CurrentSession() session: ActiveSession, @Query('mailbox') mailbox: unknown, @Res() res: Response) {
    const mailboxId = textParam(mailbox);
    const { mailboxes, html, pendingCount, fingerprint } = await this.feed.snapshot(session.caller, mailboxId);
    const query = new URLSearchParams({ ...(mailboxId && { mailbox: mailboxId }), seen: fingerprint });
    res.type('html').send(
      this.views.render('pending', {
        title: 'Pending requests',
        session,
        pendingCount,
        mailboxId,
        mailboxes,
        listHtml: html,
        fingerprint,
        eventsUrl: `/console/events?${query.toString()}`,
      }),
    );
  }

  /** The live pending list (Server-Sent Events) that console.js applies to the page in place. */
  @Get('events')
  async events(
    @CurrentSession() session: ActiveSession,
    @Query('mailbox') mailbox: unknown,
    @Query('seen') seen: unknown,
    @Req() req: Request,
    @Res() res: Response,
  ) {
    // After a reconnect the browser says what it shows (the id of the last event it got).
    const shown = textParam(req.header('last-event-id')) ?? textParam(seen);
    await this.feed.stream(session, textParam(mailbox), shown, res);
  }

  @Get('history')
  async history(
    @CurrentSession() session: ActiveSession,
    @Query('state') state: unknown,
    @Query('mailbox') mailbox: unknown,
    @Res() res: Response,
  ) {
    const [stateFilter, mailboxId] = [textParam(state), textParam(mailbox)];
    const [listing, pendingCount] = await Promise.all([
      this.requests.history(session.caller, stateFilter, mailboxId),
      this.requests.pendingCount(session.caller),
    ]);
    res.type('html').send(
      this.views.render('history', {
        title: 'History',
        session,
        pendingCount,
        mailboxId,
        state: stateFilter,
        states: DECIDED_STATES,
        ...listing,
      }),
    );
  }

  @Get('requests/:request_id')
  async request(
    @CurrentSession() session: ActiveSession,
    @Param('request_id', new PathId('chk', 'request')) id: string,
    @Query('notice') notice: unknown,
    @Res() res: Response,
  ) {
    const [shown, pendingCount] = await Promise.all([
      this.requests.request(session.caller, id),
      this.requests.pendingCount(session.caller),
    ]);
    res.type('html').send(
      this.views.render('request', {
        title: shown.request.title,
        session,
        pendingCount,
        notice: DECISION_OUTCOMES.includes(notice as DecisionOutcome) ? notice : undefined,
        ...shown,
      }),
    );
  }

  /** A mailbox's approval policy, read-only: who may decide its requests, and what else it says. */
  @Get('mailboxes/:mailbox_id/policy')
  async policy(
    @CurrentSession() session: ActiveSession,
    @Param('mailbox_id', new PathId('mbx', 'mailbox')) id: string,
    @Res() res: Response,
  ) {
    const [shown, pendingCount] = await Promise.all([
      this.requests.policy(session.caller, id),
      this.requests.pendingCount(session.caller),
    ]);
    res.type('html').send(this.views.render('policy', { title: 'Approval policy', session, pendingCount, ...shown }));
  }

  @Post('requests/:request_id/approve')
  approve(
    @CurrentSession() session: ActiveSession,
    @Param('request_id', new PathId('chk', 'request')) id: string,
    @Body() body: Record<string, unknown>,
    @Res() res: Response,
  ) {
    return this.decide(session, id, 'approved', body, res);
  }

  @Post('requests/:request_id/reject')
  reject(
    @CurrentSession() session: ActiveSession,
    @Param('request_id', new PathId('chk', 'request')) id: string,
    @Body() body: Record<string, unknown>,
    @Res() res: Response,
  ) {
    return this.decide(session, id, 'rejected', body, res);
  }

  /** Post/redirect/get: the request page then shows the outcome, whoever decided. */
  private async decide(
    session: ActiveSession,
    id: string,
    decision: ConsoleDecision,
    body: Record<string, unknown>,
    res: Response,
  ) {
    const form = { reason: body.reason, contentSha256: body.content_sha256 };
    const outcome = await this.requests.decide(session.caller, id, decision, form);
    res.redirect(303, `/console/requests/${id}?notice=${outcome}`);
  }
}
