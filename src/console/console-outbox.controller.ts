import { CanActivate, Controller, Get, Injectable, Param, Res, UseFilters, UseGuards } from '@nestjs/common';
import { Response } from 'express';
import { draftDocument } from '../approvals/draft-sanitizer';
import { Public } from '../kernel/route-decorators';
import { AlcartaError } from '../kernel/errors';
import { KeptMail, KeptMailStore } from '../outbox/kept-mail';
import { ConsoleExceptionFilter } from './console-exception.filter';
import { ConsoleRequestsService } from './console-requests.service';
import { ConsoleSessionGuard, CurrentSession } from './console-session.guard';
import { ActiveSession } from './console-session.service';
import { ConsoleViews } from './console-views';

/** The outbox pages exist only while ALCARTA_SMTP_RELAY_URL=console: keeps mail: otherwise 404, signed in or not. */
@Injectable()
export class KeptMailPageGuard implements CanActivate {
  constructor(private readonly kept: KeptMailStore) {}

  canActivate(): boolean {
    if (this.kept.enabled) return true;
    throw new AlcartaError('not_found', 'page_not_found', 'No such console page.');
  }
}

const KIND_TEXT: Record<KeptMail['kind'], string> = {
  message: 'Approved email',
  approval_mail: 'Approval mail',
};

/**
 * Local development (ALCARTA_SMTP_RELAY_URL=console:): the outbound mail this server kept instead of
 * sending, for the signed-in person, of the mailboxes their credential reaches, as the relay would
 * have received it.
 */
@Controller('console/outbox')
@Public()
@UseGuards(KeptMailPageGuard, ConsoleSessionGuard)
@UseFilters(ConsoleExceptionFilter)
export class ConsoleOutboxController {
  constructor(
    private readonly kept: KeptMailStore,
    private readonly requests: ConsoleRequestsService,
    private readonly views: ConsoleViews,
  ) {}

  @Get()
  async list(@CurrentSession() session: ActiveSession, @Res() res: Response) {
    const pendingCount = await this.requests.pendingCount(session.caller);
    res.type('html').send(
      this.views.render('outbox', {
        title: 'Outbox',
        session,
        pendingCount,
        mails: this.kept.list(session.caller.mailboxAccess),
        kindText: KIND_TEXT,
      }),
    );
  }

  @Get(':id')
  async mail(@CurrentSession() session: ActiveSession, @Param('id') id: string, @Res() res: Response) {
    const mail = /^[1-9]\d{0,15}$/.test(id) ? this.kept.find(session.caller.mailboxAccess, Number(id)) : undefined;
    if (!mail) throw new AlcartaError('not_found', 'kept_mail_not_found', 'No such kept mail.');
    const pendingCount = await this.requests.pendingCount(session.caller);
    res.type('html').send(
      this.views.render('outbox-mail', {
        title: mail.subject,
        session,
        pendingCount,
        mail,
        kind: KIND_TEXT[mail.kind],
        htmlDocument: mail.html === null ? null : draftDocument(mail.html),
      }),
    );
  }
}
