import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { MailModule } from '../mail/mail.module';
import { BearerAuthGuard } from './bearer-auth.guard';
import { BootstrapTokenService } from './bootstrap-token.service';
import { TokenEntity } from './token.entity';
import { TokenRepository } from './token.repository';
import { TokenService } from './token.service';
import { TokensController } from './tokens.controller';

@Module({
  imports: [TypeOrmModule.forFeature([TokenEntity]), MailModule],
  controllers: [TokensController],
  providers: [TokenRepository, TokenService, BootstrapTokenService, { provide: APP_GUARD, useClass: BearerAuthGuard }],
  exports: [TokenService, BootstrapTokenService],
})
export class AuthModule {}
