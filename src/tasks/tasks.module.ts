import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { WaitsModule } from '../waits/waits.module';
import { TaskRepository } from './task.repository';
import { TaskService } from './task.service';
import { TaskSweeper } from './task.sweeper';
import { TaskMetrics } from './tasks.metrics';

/** MCP Tasks (revision 2025-11-25), durable in PostgreSQL and driven by the wait engine. */
@Module({
  imports: [WaitsModule, AuthModule],
  providers: [TaskRepository, TaskService, TaskSweeper, TaskMetrics],
  exports: [TaskService, TaskSweeper],
})
export class TasksModule {}
