import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsInt,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
  ValidateNested,
} from 'class-validator';
import { MAX_POLICY_ENTRIES, MAX_QUORUM, MIN_POLICY_SECONDS } from '../approval-policy';

/** `recipients` of a policy: addresses or domains; their shapes are checked by preparePolicy. */
export class PolicyRecipientsDto {
  @IsOptional()
  @IsArray({ message: 'recipients.allow must be an array of addresses or domains' })
  @ArrayMaxSize(MAX_POLICY_ENTRIES)
  @IsString({ each: true, message: 'each of recipients.allow must be a string' })
  @MaxLength(320, { each: true })
  allow?: string[];

  @IsOptional()
  @IsArray({ message: 'recipients.block must be an array of addresses or domains' })
  @ArrayMaxSize(MAX_POLICY_ENTRIES)
  @IsString({ each: true, message: 'each of recipients.block must be a string' })
  @MaxLength(320, { each: true })
  block?: string[];

  @IsOptional()
  @IsBoolean({ message: 'recipients.auto_approve must be true or false' })
  auto_approve?: boolean;
}

/**
 * The body of `PUT /v1/mailboxes/{id}/policy`: the whole policy (a field left out takes its
 * default). The types are checked here; what the values mean together, by preparePolicy.
 */
export class SetPolicyDto {
  /** `sub:…`, `client:…`, `group:…`, `tok_…` or `email:<address>`; null or absent: anyone who may decide. */
  @IsOptional()
  @IsArray({ message: 'approvers must be null or an array of approvers' })
  @ArrayMaxSize(MAX_POLICY_ENTRIES)
  @IsString({ each: true, message: 'each of approvers must be a string' })
  @MaxLength(500, { each: true })
  approvers?: string[] | null;

  @IsOptional()
  @IsInt({ message: 'quorum must be a whole number' })
  @Min(1)
  @Max(MAX_QUORUM)
  quorum?: number;

  @IsOptional()
  @IsInt({ message: 'expires_after_seconds must be a whole number of seconds' })
  @Min(MIN_POLICY_SECONDS)
  expires_after_seconds?: number | null;

  @IsOptional()
  @IsInt({ message: 'escalate_after_seconds must be a whole number of seconds' })
  @Min(MIN_POLICY_SECONDS)
  escalate_after_seconds?: number | null;

  @IsOptional()
  @IsArray({ message: 'escalate_to must be an array of email addresses' })
  @ArrayMaxSize(MAX_POLICY_ENTRIES)
  @IsString({ each: true, message: 'each of escalate_to must be a string' })
  @MaxLength(320, { each: true })
  escalate_to?: string[];

  @IsOptional()
  @ValidateNested()
  @Type(() => PolicyRecipientsDto)
  recipients?: PolicyRecipientsDto;
}
