/** What the service reads of sessions and tasks before taking a lease (the target; the lease is per task). */
export interface PromptTargets {
  session(sessionId: string): Promise<{ taskId: string; state: string; promptable: boolean } | undefined>;
  /** The task's current primary session, or none; undefined when the task does not exist. */
  task(taskId: string): Promise<{ archived: boolean; primary: { sessionId: string; state: string; promptable: boolean } | null } | undefined>;
  /** Whether the task is archived (a send needs no primary session); undefined when it does not exist. */
  archived(taskId: string): Promise<boolean | undefined>;
  /** Whether a prompt was accepted under this caller id before (then the hook is not run again). */
  callerIdUsed(callerId: string): Promise<boolean>;
}
