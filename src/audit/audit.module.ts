import { Global, Module } from '@nestjs/common';
import { SecretsModule } from '../secrets/secrets.module';
import { AuditController } from './audit.controller';
import { AuditLog } from './audit-log';
import { AuditRetentionHousekeeping } from './audit-retention.housekeeping';

/**
 * The audit trail. Global: every feature module records its acts with AuditLog, and importing it
 * into each would only repeat the same line.
 */
@Global()
@Module({
  imports: [SecretsModule],
  controllers: [AuditController],
  providers: [AuditLog, AuditRetentionHousekeeping],
  exports: [AuditLog],
})
export class AuditModule {}
