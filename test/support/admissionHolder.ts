/**
 * A second process for the admission tests: `node --import tsx test/support/admissionHolder.ts`
 * with DATABASE_URL, TASK_ID and optionally CALLER_ID and ADMISSION_LOCK_TIMEOUT_MS. It takes the
 * task's admission lease, prints `held`, and holds it until a
 * line `release` arrives on stdin (or it is killed); then prints `released` and exits 0. A lease it
 * could not take prints `lock_timeout` and exits 3.
 */
import readline from 'node:readline';
import { createTaskAdmission } from '../../src/repository/admission/taskAdmission.js';
import { createDatabase } from '../../src/repository/database.js';

const db = createDatabase(process.env.DATABASE_URL, { maxConnections: 2 });
const admission = createTaskAdmission(db, { lockTimeoutMs: Number(process.env.ADMISSION_LOCK_TIMEOUT_MS ?? 5000) });
const lines = readline.createInterface({ input: process.stdin });
const release = new Promise<void>((resolve) => lines.on('line', (line) => line.trim() === 'release' && resolve()));

const outcome = await admission.withLease(
  process.env.TASK_ID!,
  async () => {
    process.stdout.write('held\n');
    await release;
  },
  { callerId: process.env.CALLER_ID || undefined },
);
lines.close();
await db.destroy();
process.stdout.write(outcome.ok ? 'released\n' : `${outcome.reason}\n`);
process.exit(outcome.ok ? 0 : 3);
