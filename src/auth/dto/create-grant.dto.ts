import { ArrayMaxSize, ArrayNotEmpty, IsArray, IsString, MaxLength } from 'class-validator';
import { PRINCIPAL_MAX_LENGTH } from '../grant.service';

export class CreateGrantDto {
  /** `sub:<subject>`, `client:<client id>` or `group:<group name>`; its shape is checked by GrantService. */
  @IsString()
  @MaxLength(PRINCIPAL_MAX_LENGTH)
  principal: string;

  /** Mailbox ids, or ["*"] for all mailboxes. */
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(1000)
  @IsString({ each: true })
  mailboxes: string[];
}
