import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayNotEmpty,
  IsArray,
  IsBoolean,
  IsInt,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
} from 'class-validator';

/** The longest description an endpoint keeps. */
export const MAX_DESCRIPTION_LENGTH = 500;

export class CreateWebhookDto {
  /** http(s) only; checked again at every delivery. */
  @IsString()
  @MaxLength(2000)
  url: string;

  /** Event types (docs/webhooks.md, "Events"). */
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(20)
  @IsString({ each: true })
  events: string[];

  /** Mailbox ids, or ["*"] for all mailboxes. */
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(1000)
  @IsString({ each: true })
  mailbox_ids: string[];

  @IsOptional()
  @IsString()
  @MaxLength(MAX_DESCRIPTION_LENGTH, { message: `description is at most ${MAX_DESCRIPTION_LENGTH} characters` })
  description?: string;
}

export class UpdateWebhookDto {
  @IsOptional()
  @IsString()
  @MaxLength(2000)
  url?: string;

  @IsOptional()
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(20)
  @IsString({ each: true })
  events?: string[];

  @IsOptional()
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(1000)
  @IsString({ each: true })
  mailbox_ids?: string[];

  @IsOptional()
  @IsString()
  @MaxLength(MAX_DESCRIPTION_LENGTH, { message: `description is at most ${MAX_DESCRIPTION_LENGTH} characters` })
  description?: string;

  /** false disables the endpoint; true enables it again (its failure streak starts over). */
  @IsOptional()
  @IsBoolean()
  enabled?: boolean;
}

export class ReplayWebhookDto {
  /** Redeliver the events after this cursor (a delivery's `cursor`); "0": every event still kept. */
  @IsString()
  @Matches(/^\d{1,19}$/, { message: 'since_cursor must be a cursor of a delivered event (digits)' })
  since_cursor: string;
}

export class ListDeliveriesQuery {
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(200)
  limit?: number;
}
