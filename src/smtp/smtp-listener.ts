import { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { SMTPServer } from 'smtp-server';
import { SMTPConnection, SMTPConnectionOptions } from 'smtp-server/lib/smtp-connection.js';

/** A reply text that starts with its own enhanced status code (RFC 3463), e.g. `4.3.1 …`. */
const OWN_ENHANCED_CODE = /^[245]\.\d{1,3}\.\d{1,3} /;

/**
 * smtp-server's connection, except that a reply whose text starts with an enhanced status code is
 * sent with that one: smtp-server derives the code from the reply code alone (452 → 4.2.2 "mailbox
 * full", 421 → 4.4.2), which says the wrong thing for a spent budget (4.3.1) or a closed session
 * (4.7.0). The rest of its replies keep the codes smtp-server gives them.
 */
class ExplicitCodeConnection extends SMTPConnection {
  override send(code: number, data?: string | string[] | null, context?: string | false): void {
    super.send(code, data, typeof data === 'string' && OWN_ENHANCED_CODE.test(data) ? false : context);
  }
}

/** smtp-server with ExplicitCodeConnection for every session (the same steps as its own connect()). */
export class SmtpListener extends SMTPServer {
  override connect(socket: Socket | TLSSocket, socketOptions?: SMTPConnectionOptions | null): void {
    const connection = new ExplicitCodeConnection(this, socket, socketOptions);
    this.connections.add(connection);
    connection.on('error', (err: Error) => this._onError(err));
    connection.on('connect', (data: Parameters<SMTPServer['_onClientConnect']>[0]) => this._onClientConnect(data));
    connection.init();
  }
}
