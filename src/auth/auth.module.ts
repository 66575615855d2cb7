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
import { OAuthAuthenticator } from './oauth/oauth-authenticator.service';
import { ProtectedResourceController } from './protected-resource.controller';
import { CredentialRepository } from './credential.repository';
import { PrincipalRepository } from './principal.repository';
import { PrincipalService } from './principal.service';
import { TokenEntity } from './token.entity';
import { TokenRepository } from './token.repository';
import { TokenService } from './token.service';
import { TokensController } from './tokens.controller';

@Module({
  imports: [TypeOrmModule.forFeature([TokenEntity, GrantEntity]), MailModule, EventsModule],
  controllers: [TokensController, GrantsController, ProtectedResourceController],
  providers: [
    TokenRepository,
    TokenService,
    BootstrapTokenService,
    CredentialRevocationHooks,
    LapsedCredentialSweeper,
    GrantRepository,
    GrantService,
    OAuthAuthenticator,
    PrincipalRepository,
    PrincipalService,
    CredentialRepository,
    { provide: APP_GUARD, useClass: BearerAuthGuard },
  ],
  exports: [
    CredentialRepository,
    GrantService,
    OAuthAuthenticator,
    TokenService,
    BootstrapTokenService,
    CredentialRevocationHooks,
    LapsedCredentialSweeper,
  ],
})
export class AuthModule {}
