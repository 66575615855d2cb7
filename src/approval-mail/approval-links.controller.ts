import { Body, Controller, Get, Param, Post, Res } from '@nestjs/common';
import { Response } from 'express';
import { describeRemoved, draftDocument } from '../approvals/draft-sanitizer';
import { CONTENT_SHA256_PATTERN } from '../approvals/request-content';
import { Public } from '../kernel/route-decorators';
import { AlcartaError } from '../kernel/errors';
import { repairText } from '../common/text-safety';
import { ConsoleViews } from '../console/console-views';
import { ApprovalLinksService, LinkLookup } from './approval-links.service';

const MAX_REASON = 2000;

/**
 * The page an approval mail links to (docs/approvers.md). No session: the token in the path is the
 * capability. GET only shows the request and a form; the form's POST decides. Every refusal is a
 * plain page with a 4xx status.
 */
@Controller('console/links')
export class ApprovalLinksController {
  constructor(
    private readonly links: ApprovalLinksService,
    private readonly views: ConsoleViews,
  ) {}

  @Public()
  @Get(':token')
  async show(@Param('token') token: string, @Res() res: Response): Promise<void> {
    const found = await this.links.confirmation(token);
    if (!('ok' in found)) return this.refuse(res, found);
    const { link, request, mailboxAddress, askedBy } = found;
    res.type('html').send(
      this.views.render('links/confirm', {
        title: 'Decide a request',
        email: link.email,
        mailboxAddress,
        askedBy,
        request,
        draftHtml: request.email?.html ? draftDocument(request.email.html) : null,
        removedFromDraft: request.sanitized ? describeRemoved(request.sanitized) : '',
        expiresAt: request.expiresAt.toISOString(),
        action: `/console/links/${encodeURIComponent(token)}`,
      }),
    );
  }

  @Public()
  @Post(':token')
  async decide(
    @Param('token') token: string,
    @Body() body: Record<string, unknown> | undefined,
    @Res() res: Response,
  ): Promise<void> {
    const decision = body?.decision;
    const reason = typeof body?.reason === 'string' ? repairText(body.reason).trim() : '';
    const shown = body?.content_sha256;
    if ((decision !== 'approved' && decision !== 'rejected') || reason.length > MAX_REASON) {
      return this.notice(
        res,
        400,
        'Not understood',
        `Choose Approve or Reject; a reason has at most ${MAX_REASON} characters.`,
      );
    }
    const contentSha256 = typeof shown === 'string' && CONTENT_SHA256_PATTERN.test(shown) ? shown : undefined;
    let outcome: LinkLookup;
    try {
      outcome = await this.links.decide(token, decision, reason === '' ? null : reason, contentSha256);
    } catch (err) {
      if (!(err instanceof AlcartaError)) throw err;
      if (err.reason === 'invalid_content_sha256') {
        return this.notice(res, 400, 'Not understood', 'This form is incomplete. Open the link again and decide.');
      }
      if (err.reason !== 'content_changed') throw err;
      return this.notice(res, 409, 'The request is not what you saw', `${err.message} Nothing was decided.`);
    }
    if (!('ok' in outcome)) return this.refuse(res, outcome);
    const { state, quorum, approvals } = outcome.request;
    if (state === 'pending') {
      return this.notice(
        res,
        200,
        'Approval recorded',
        `Your approval of “${outcome.request.title}” is recorded: ${approvals.length} of ${quorum} approvals. It is decided when enough approvers have approved. You can close this page.`,
      );
    }
    const verb = outcome.request.state === 'approved' ? 'approved' : 'rejected';
    this.notice(res, 200, `Request ${verb}`, `You ${verb} “${outcome.request.title}”. You can close this page.`);
  }

  private refuse(res: Response, refusal: Exclude<LinkLookup, { ok: true }>): void {
    switch (refusal.kind) {
      case 'unknown':
        return this.notice(
          res,
          404,
          'Unknown link',
          'This link is not known here. Use the link from your approval mail.',
        );
      case 'expired':
        return this.notice(
          res,
          410,
          'Link expired',
          'The request expired, and this link with it. Nothing was decided.',
        );
      case 'used':
        return this.notice(
          res,
          410,
          'Link already used',
          `This link has been used: the request is ${stateText(refusal)}.`,
        );
      case 'self_approval':
        return this.notice(
          res,
          403,
          'You cannot decide this request',
          'This link was mailed to an address of the requester itself (its own email, or a mailbox it reads), so it cannot approve or reject the request. Nothing was decided: another approver must decide it.',
        );
      case 'not_an_approver':
        return this.notice(
          res,
          403,
          'You cannot decide this request',
          "This mailbox's policy names who may approve or reject its requests, and this link's address is not among them. Nothing was decided.",
        );
      case 'already_approved':
        return this.notice(
          res,
          409,
          'You have already approved',
          'Your approval is recorded; the request waits for other approvers. Nothing more was decided.',
        );
      case 'decided':
        return this.notice(
          res,
          409,
          'Already decided',
          `The request was decided elsewhere: it is ${stateText(refusal)}.`,
        );
    }
  }

  private notice(res: Response, status: number, title: string, message: string): void {
    res.status(status).type('html').send(this.views.render('links/notice', { title, message }));
  }
}

function stateText(r: { state: string; decidedBy: string | null }): string {
  return r.decidedBy ? `${r.state} by ${r.decidedBy}` : r.state;
}
