import { IsOptional, IsString, MaxLength } from 'class-validator';

export class DecideRequestDto {
  @IsOptional()
  @IsString()
  @MaxLength(2000)
  reason?: string;
}
