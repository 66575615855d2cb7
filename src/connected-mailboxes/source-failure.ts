/** Where checking or using a connected account failed. */
export type SourceStage = 'connect' | 'tls' | 'auth' | 'folder' | 'smtp';

/** The reasons of a failure, as REST errors and `source/test` results name them. */
export type SourceFailureReason =
  'source_unreachable' | 'source_tls_failed' | 'source_auth_failed' | 'source_folder_missing' | 'source_smtp_failed';

/**
 * A connected account could not be used: the message says what happened in words an operator can
 * act on, and never holds a secret.
 */
export class SourceFailure extends Error {
  constructor(
    readonly stage: SourceStage,
    readonly reason: SourceFailureReason,
    message: string,
  ) {
    super(message);
    this.name = 'SourceFailure';
  }

  /** The folder state it leaves a synced folder in. */
  get folderState(): 'auth_failed' | 'unreachable' {
    return this.reason === 'source_auth_failed' ? 'auth_failed' : 'unreachable';
  }
}
