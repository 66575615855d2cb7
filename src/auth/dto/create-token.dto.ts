import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayNotEmpty, IsArray, IsDate, IsIn, IsOptional, IsString, Length } from 'class-validator';
import { isScope, SCOPES } from '../../kernel/scopes';

export class CreateTokenDto {
  @IsString()
  @Length(1, 200)
  name: string;

  @IsArray()
  @ArrayNotEmpty()
  @IsIn(SCOPES, {
    each: true,
    message: ({ value }) =>
      `scopes has unknown values (${unknownScopes(value).join(', ')}); known scopes: ${SCOPES.join(', ')}`,
  })
  scopes: string[];

  /** Mailbox ids, or ["*"] for all mailboxes. */
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(1000)
  @IsString({ each: true })
  mailboxes: string[];

  @IsOptional()
  @Type(() => Date)
  @IsDate({ message: 'expires_at must be an ISO 8601 date-time' })
  expires_at?: Date;
}

function unknownScopes(value: unknown): string[] {
  return (Array.isArray(value) ? value : [value]).filter((s) => typeof s !== 'string' || !isScope(s)).map(String);
}
