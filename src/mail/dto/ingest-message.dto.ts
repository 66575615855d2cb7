import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsDate,
  IsEmail,
  IsOptional,
  IsString,
  MaxDate,
  MaxLength,
  MinDate,
} from 'class-validator';

/** An inbound message as JSON (the alternative is a raw `message/rfc822` body). */
export class IngestMessageDto {
  @IsEmail({}, { message: 'from must be an email address' })
  from: string;

  @IsArray()
  @ArrayMaxSize(1000)
  @IsEmail({}, { each: true, message: 'to must be a list of email addresses' })
  to: string[];

  @IsOptional()
  @IsArray()
  @ArrayMaxSize(1000)
  @IsEmail({}, { each: true, message: 'cc must be a list of email addresses' })
  cc?: string[];

  @IsString()
  @MaxLength(2000)
  subject: string;

  @IsString()
  text: string;

  @IsOptional()
  @IsString()
  html?: string;

  @IsOptional()
  @IsString()
  @MaxLength(998)
  message_id_header?: string;

  @IsOptional()
  @IsString()
  @MaxLength(998)
  in_reply_to?: string;

  @IsOptional()
  @Type(() => Date)
  @IsDate({ message: 'received_at must be an ISO 8601 date-time' })
  // Within what PostgreSQL's timestamptz holds (JavaScript dates reach back to year -271821).
  @MinDate(new Date('0001-01-01T00:00:00Z'), { message: 'received_at must be in the years 1 to 9999' })
  @MaxDate(new Date('9999-12-31T23:59:59.999Z'), { message: 'received_at must be in the years 1 to 9999' })
  received_at?: Date;
}
