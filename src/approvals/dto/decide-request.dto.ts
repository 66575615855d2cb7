import { IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { CONTENT_SHA256_PATTERN } from '../request-content';

export class DecideRequestDto {
  @IsOptional()
  @IsString()
  @MaxLength(2000)
  reason?: string;

  /** The `content_sha256` of the request as the decider saw it; a decision of other content is refused. */
  @IsOptional()
  @Matches(CONTENT_SHA256_PATTERN, { message: 'content_sha256 must be 64 lowercase hexadecimal digits' })
  content_sha256?: string;
}
