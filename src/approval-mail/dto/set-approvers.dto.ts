import { ArrayMaxSize, IsArray, IsEmail, MaxLength } from 'class-validator';

/** Most approvers one mailbox can have: each new request sends this many mails. */
export const MAX_APPROVERS = 20;

export class SetApproversDto {
  @IsArray({ message: 'emails must be an array of email addresses' })
  @ArrayMaxSize(MAX_APPROVERS, { message: `emails may list at most ${MAX_APPROVERS} addresses` })
  @IsEmail({}, { each: true, message: 'each of emails must be an email address' })
  @MaxLength(320, { each: true })
  emails: string[];
}
