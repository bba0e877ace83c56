/**
 * The last output tails of each job read from its guest (SQLite and PostgreSQL alike): a job
 * whose machine died, or whose sandbox was deleted or timed out, still shows them.
 */
export const JOB_TAILS_MIGRATION = `ALTER TABLE jobs ADD COLUMN stdout_tail TEXT NOT NULL DEFAULT '';
   ALTER TABLE jobs ADD COLUMN stderr_tail TEXT NOT NULL DEFAULT '';`;
