import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config';
import { OPERATOR } from '../kernel/caller';
import { SCOPES } from '../kernel/scopes';
import { TokenRepository } from './token.repository';
import { TokenService } from './token.service';

const BOOTSTRAP_LOCK_KEY = 0x616c6362;

/**
 * Makes a fresh installation usable: on a database without tokens, creates an admin token. Its
 * secret is ALCARTA_BOOTSTRAP_TOKEN when set (nothing printed), otherwise generated and printed
 * once as a plain banner on standard error, never through the logger. A transaction-level advisory
 * lock keeps replicas that start together from creating two.
 */
@Injectable()
export class BootstrapTokenService {
  private readonly logger = new Logger(BootstrapTokenService.name);

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly tokens: TokenRepository,
    private readonly tokenService: TokenService,
    private readonly config: AppConfig,
  ) {}

  async ensureAdminToken(): Promise<void> {
    const created = await this.dataSource.transaction(async (manager) => {
      await manager.query('SELECT pg_advisory_xact_lock($1)', [BOOTSTRAP_LOCK_KEY]);
      if (!(await this.tokens.isEmpty(manager))) return null;
      return this.tokenService.create(
        OPERATOR,
        {
          name: 'bootstrap admin',
          scopes: [...SCOPES],
          mailboxes: ['*'],
          expiresAt: null,
          secret: this.config.bootstrapTokenSecret,
        },
        manager,
      );
    });
    if (!created) return;
    this.logger.log({ msg: 'bootstrap admin token created', token_id: created.token_id });
    if (!this.config.bootstrapTokenSecret) {
      process.stderr.write(
        [
          '',
          '================================================================================',
          ' Alcarta admin token (shown once; store it now, it is kept only as a hash):',
          '',
          `   ${created.secret}`,
          '',
          ` token id: ${created.token_id}   scopes: all   mailboxes: *`,
          '================================================================================',
          '',
        ].join('\n') + '\n',
      );
    }
  }
}
