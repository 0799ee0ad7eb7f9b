/**
 * The exit code of every command, by class of outcome (README "Exit codes", docs/configuration.md).
 * A script can tell "fix the settings" (2) from "try again later" (3) without reading the message.
 */
export const EXIT_CODES = {
  /** Done. */
  ok: 0,
  /**
   * The work failed or found a problem: drift (`verify`), a repair or reprojection that failed, an
   * index still missing after `--add-indexes`, a record not found, an unexpected error.
   */
  failed: 1,
  /**
   * It cannot run as configured, and running it again will not help: an unknown command or flag, a
   * setting that does not validate, credentials or permissions the server refuses, a TLS handshake
   * or certificate refused, a database that does not exist or that the schema mode refuses.
   */
  configuration: 2,
  /**
   * A service it needs did not answer (connection refused, timed out, host not found): nothing was
   * changed; it may work once the service is up, or the address is wrong.
   */
  unreachable: 3,
} as const;
