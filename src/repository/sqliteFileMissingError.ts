import { DatabaseUrlError } from './databaseUrlError.js';

/**
 * A read-only open (`verify`, `doctor`) of a `sqlite:<path>` whose file does not exist. Those
 * commands never create a database, so this is the URL's fault: a configuration error (exit 2),
 * with the code of DatabaseUrlError.
 */
export class SqliteFileMissingError extends DatabaseUrlError {
  override name = 'SqliteFileMissingError';
  constructor(
    readonly url: string,
    readonly file: string,
  ) {
    const resolved = url === `sqlite:${file}` ? '' : `${file}; `;
    super(
      `DATABASE_URL ${url}: no such file (${resolved}verify and doctor never create a database: check the path, or create it with \`pending-projector migrate\` or by starting the worker)`,
    );
  }
}
