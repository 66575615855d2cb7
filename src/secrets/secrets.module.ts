import { Module } from '@nestjs/common';
import { SecretBox } from './secret-box';

/** The SecretBox, sealing the credentials of connected mailboxes with the configured key. */
@Module({
  providers: [SecretBox],
  exports: [SecretBox],
})
export class SecretsModule {}
