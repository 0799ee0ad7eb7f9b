import type { AdmissionOutcome } from '../repository/admission/taskAdmission.js';

/**
 * A store's writes under a task's admission lock: one transaction that holds the task's admission
 * lock first, with the store over it. The services see the store only, never the database context
 * the transaction runs in; src/bin/assembly.ts builds this over `TaskAdmission.withMutation`.
 */
export interface AdmittedWrites<S> {
  mutate<T>(taskId: string, fn: (store: S) => Promise<T>): Promise<AdmissionOutcome<T>>;
}
