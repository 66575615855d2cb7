import { Client } from 'pg';
import { grantView } from '../auth/grant.views';
import { tokenView } from '../auth/token.views';
import { AppConfig } from '../config/app-config';
import { validateEnvironment } from '../config/environment';
import { LocalDatabase, openEmbeddedPostgres } from '../database/embedded-postgres';
import { MailboxSourceEntity } from '../connected-mailboxes/mailbox-source.entity';
import { sourceView } from '../connected-mailboxes/source.views';
import { mailboxView } from '../mail/message.views';
import { ReadCommand } from './command-line';
import { CommandOutput, grantLine, mailboxLine, printOutput } from './output';

/**
 * The listing commands, on one plain `pg` connection: loading the application (Nest, TypeORM and
 * every module) takes seconds, a listing needs a query. The rows go through the views the REST API
 * uses, so `--json` prints what `GET /v1/…` answers. Reads neither apply nor check migrations: on a
 * database without the schema there is nothing to list, and the lists say so.
 */
export async function executeRead(command: ReadCommand): Promise<number> {
  let embedded: LocalDatabase | undefined;
  try {
    const config = new AppConfig(validateEnvironment(process.env));
    embedded = config.databaseUrl ? undefined : await openEmbeddedPostgres(config.dataDir, { persistent: true });
    const client = new Client({ connectionString: embedded?.url ?? config.databaseUrl, application_name: 'alcarta' });
    await client.connect();
    try {
      const [{ table }] = (
        await client.query<{ table: string | null }>(`SELECT to_regclass('schema_migrations')::text AS table`)
      ).rows;
      if (!table) {
        process.stderr.write(
          'note: the database has no Alcarta schema yet; `migrate` or starting the server creates it\n',
        );
      }
      printOutput(command, table ? await list(client, command) : emptyList(command));
      return 0;
    } finally {
      await client.end();
    }
  } catch (err) {
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    await embedded?.close();
  }
}

async function list(client: Client, command: ReadCommand): Promise<CommandOutput> {
  switch (command.name) {
    case 'mailboxes list': {
      const { rows } = await client.query<{ id: string; address: string; name: string | null }>(
        'SELECT id, address, name FROM mailboxes ORDER BY created_at, id',
      );
      const sources = await connectedSources(client);
      return mailboxList(rows.map((row) => mailboxView(row, sources.get(row.id))));
    }
    case 'tokens list': {
      const { rows } = await client.query(
        `SELECT id, name, scopes, mailboxes, expires_at AS "expiresAt", revoked_at AS "revokedAt",
                created_at AS "createdAt"
           FROM tokens ORDER BY created_at, id`,
      );
      return tokenList(rows.map(tokenView));
    }
    case 'grants list': {
      const { rows } = await client.query(
        'SELECT id, principal, mailboxes, created_at AS "createdAt" FROM grants ORDER BY created_at, id',
      );
      return grantList(rows.map(grantView));
    }
  }
}

function emptyList(command: ReadCommand): CommandOutput {
  switch (command.name) {
    case 'mailboxes list':
      return mailboxList([]);
    case 'tokens list':
      return tokenList([]);
    case 'grants list':
      return grantList([]);
  }
}

/** The views of the connected accounts, as GET /v1/mailboxes shows them (none before their migration). */
async function connectedSources(client: Client): Promise<Map<string, ReturnType<typeof sourceView>>> {
  const [{ table }] = (
    await client.query<{ table: string | null }>(`SELECT to_regclass('mailbox_sources')::text AS table`)
  ).rows;
  if (!table) return new Map();
  const { rows } = await client.query<MailboxSourceEntity>(
    `SELECT mailbox_id AS "mailboxId", settings, state, last_error AS "lastError", last_sync_at AS "lastSyncAt",
            behind_since AS "behindSince"
       FROM mailbox_sources`,
  );
  const now = Date.now();
  return new Map(rows.map((row) => [row.mailboxId, sourceView(row, now)]));
}

function mailboxList(mailboxes: ReturnType<typeof mailboxView>[]): CommandOutput {
  return {
    json: { mailboxes },
    text: mailboxes.map(mailboxLine).join('\n'),
  };
}

function tokenList(tokens: ReturnType<typeof tokenView>[]): CommandOutput {
  return {
    json: { tokens },
    text: tokens
      .map(
        (t) =>
          `${t.token_id}  ${t.name}  scopes=${t.scopes.join(',')}  mailboxes=${t.mailboxes.join(',')}` +
          `${t.expires_at ? `  expires=${t.expires_at}` : ''}${t.revoked_at ? '  REVOKED' : ''}`,
      )
      .join('\n'),
  };
}

function grantList(grants: ReturnType<typeof grantView>[]): CommandOutput {
  return { json: { grants }, text: grants.map(grantLine).join('\n') };
}
