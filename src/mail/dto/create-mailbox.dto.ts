import { IsEmail, IsObject, IsOptional, IsString, MaxLength } from 'class-validator';

export class CreateMailboxDto {
  @IsEmail({}, { message: 'address must be an email address' })
  @MaxLength(320)
  address: string;

  @IsOptional()
  @IsString()
  @MaxLength(200)
  name?: string;

  /** A connected account (docs/connected-mailboxes.md); its fields are checked by that module. */
  @IsOptional()
  @IsObject({ message: 'source must be an object' })
  source?: Record<string, unknown> | null;
}
