import { IsEmail, IsOptional, IsString, MaxLength } from 'class-validator';

export class CreateMailboxDto {
  @IsEmail({}, { message: 'address must be an email address' })
  @MaxLength(320)
  address: string;

  @IsOptional()
  @IsString()
  @MaxLength(200)
  name?: string;
}
