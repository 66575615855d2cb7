import { Type } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
import { REQUEST_STATES, RequestState } from '../approval-request.entity';

export class ListRequestsQuery {
  @IsOptional()
  @IsIn(REQUEST_STATES)
  state?: RequestState;

  @IsOptional()
  @IsString()
  mailbox_id?: string;

  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(500)
  limit?: number;
}
