/**
 * The values of settings that other layers act on: the repository opens the default database and
 * takes the schema mode and timestamp form. They live here, importing nothing, so config.ts (the
 * one reader of the configuration) and the repository share them without either importing the
 * other.
 */

/** Where the database is when DATABASE_URL is unset: a SQLite file under ./data. */
export const DEFAULT_DATABASE_URL = 'sqlite:./data/pending-projector.db';

/** The SCHEMA_MODE setting: `auto` detects, the others force a mode (and are refused where it does not fit). */
export const SCHEMA_MODE_SETTINGS = ['auto', 'owned', 'kandev'] as const;

/** The TIMESTAMP_FORM setting: `auto` detects from the newest rows, the others force the written form. */
export const TIMESTAMP_FORM_SETTINGS = ['auto', 'canonical', 'kandev'] as const;
