import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { BearerAuthGuard } from './bearer-auth.guard';
import { BootstrapTokenService } from './bootstrap-token.service';
import { CredentialRevocationHooks } from './credential-revocation';
import { GrantEntity } from './grant.entity';
import { GrantRepository } from './grant.repository';
import { GrantService } from './grant.service';
import { GrantsController } from './grants.controller';
import { LapsedCredentialSweeper } from './lapsed-credential.sweeper';
import { TokenEntity } from './token.entity';
import { TokenRepository } from './token.repository';
import { TokenService } from './token.service';
import { TokensController } from './tokens.controller';

@Module({
  imports: [TypeOrmModule.forFeature([TokenEntity, GrantEntity]), MailModule, EventsModule],
  controllers: [TokensController, GrantsController],
  providers: [
    TokenRepository,
    TokenService,
    BootstrapTokenService,
    CredentialRevocationHooks,
    LapsedCredentialSweeper,
    GrantRepository,
    GrantService,
    { provide: APP_GUARD, useClass: BearerAuthGuard },
  ],
  exports: [GrantService, TokenService, BootstrapTokenService, CredentialRevocationHooks, LapsedCredentialSweeper],
})
export class AuthModule {}
