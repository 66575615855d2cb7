import { IsObject, IsOptional, IsString, MaxLength } from 'class-validator';

export class UpdateMailboxDto {
  @IsOptional()
  @IsString()
  @MaxLength(200)
  name?: string | null;

  /**
   * Merged onto the stored source at its first level (docs/connected-mailboxes.md); null
   * disconnects the account. Its fields are checked by the connected-mailboxes module.
   */
  @IsOptional()
  @IsObject({ message: 'source must be an object, or null to disconnect the account' })
  source?: Record<string, unknown> | null;
}
