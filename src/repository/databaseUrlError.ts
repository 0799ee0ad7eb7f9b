import { ERROR_CODES, PendingProjectorError } from '../errors.js';

/**
 * A DATABASE_URL (or a setting that goes with it, such as DATABASE_PASSWORD_FILE) that cannot be
 * used: no dialect accepts it, or its TLS or password settings do not hold together. The message
 * names the parameter and never carries a secret.
 */
export class DatabaseUrlError extends PendingProjectorError {
  override name = 'DatabaseUrlError';
  constructor(message: string) {
    super(ERROR_CODES.CONFIG_DATABASE_URL, message);
  }
}
