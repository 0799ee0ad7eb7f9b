import BetterSqlite3 from 'better-sqlite3';
import { errors, RequestError } from '@nats-io/transport-node';
import { KnexTimeoutError } from 'knex';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import {
  classifyFailure,
  ConflictExhaustedError,
  DuplicateRevisionsError,
  ERROR_CODES,
  PendingProjectorError,
  poisonCause,
  PoisonInputError,
} from '../../src/errors.js';
import { SummaryParseError } from '../../src/events/statusSummary.js';
import { ClaimIntegrityError } from '../../src/repository/clarifications/clarificationClaims.js';
import { InvalidCursorError } from '../../src/repository/clarifications/clarifications.js';
import { DatabaseUrlError } from '../../src/repository/database.js';
import { TransactionEndedError } from '../../src/repository/driver/connectionTransaction.js';
import { ReservationEndedError } from '../../src/repository/driver/reservedConnection.js';
import { AdmissionLockOrderError, AdmissionPoolTooSmallError } from '../../src/repository/admission/taskAdmission.js';
import { CorruptMetaError } from '../../src/repository/projection/meta.js';
import { SchemaRefusedError } from '../../src/repository/schema/schemaMode.js';
import { SessionNotFoundError } from '../../src/repository/turns/turns.js';
import { PlanCommentIntegrityError } from '../../src/repository/planComments/planCommentOutcomes.js';
import { NatsPermissionError } from '../../src/events/natsPermissions.js';
import { NatsMaxPayloadError } from '../../src/events/natsMaxPayload.js';
import { ConnectionFailedError } from '../../src/bin/connectionFailure.js';
import { SqliteWorkerLockedError } from '../../src/repository/sqliteWorkerLock.js';

/** One instance of every error class of ours. */
const ours: PendingProjectorError[] = [
  new ConfigError(['HEALTH_PORT: not a number']),
  new DatabaseUrlError('bad url'),
  new PoisonInputError('invalid_id', 'bad id'),
  new ConflictExhaustedError('task-1', 3),
  new DuplicateRevisionsError('task-1', 4, 5),
  new SummaryParseError('not JSON'),
  new CorruptMetaError('not canonical'),
  new ClaimIntegrityError('lost its claim'),
  new InvalidCursorError('not ours'),
  new SessionNotFoundError('session-1'),
  new TransactionEndedError('ended'),
  new SchemaRefusedError('it has some of the Kandev tables the service reads, but not all of them', ['missing table kandev_meta']),
  new ReservationEndedError('given back'),
  new AdmissionPoolTooSmallError(1),
  new AdmissionLockOrderError('inside a transaction'),
  new PlanCommentIntegrityError('plan vanished'),
  new NatsPermissionError([{ operation: 'subscribe', subject: 'pending_projector.v1.>', queue: 'pending-projector', purpose: 'the endpoints' }]),
  new NatsMaxPayloadError("the NATS server's max_payload is 1048576 bytes"),
  new SqliteWorkerLockedError('/data/pp.db', '/data/pp.db.worker-lock', { pid: 7, host: 'h', since: '2026-12-02T00:00:00.000Z' }),
  new ConnectionFailedError(
    'unreachable',
    { service: 'NATS', setting: 'NATS_URL / --nats-url', address: 'nats://127.0.0.1:1' },
    'connection refused',
    'Check it',
  ),
];

describe('the error code registry', () => {
  it('gives every error class of ours its own registered code, and registers no code nothing carries', () => {
    const codes = ours.map((error) => error.code);
    expect(new Set(codes).size).toBe(ours.length);
    expect([...codes].sort()).toEqual(Object.values(ERROR_CODES).sort());
  });

  it('keeps each class its name and its cause', () => {
    const cause = new Error('underneath');
    const error = new PoisonInputError('invalid_id', 'bad id', { cause });
    expect(error).toMatchObject({ name: 'PoisonInputError', code: 'POISON_INPUT', reason: 'invalid_id', cause });
    for (const e of ours) expect(e.name).toBe(e.constructor.name);
  });
});

/** How node-postgres reports a server error: a DatabaseError with the SQLSTATE as code. */
function pgError(code: string): Error {
  const error = new pg.DatabaseError(`server said ${code}`, 0, 'error');
  error.code = code;
  return error;
}

/** How Node reports a socket failure: an Error with the errno name as code. */
function socketError(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code, errno: -1, syscall: 'connect' });
}

describe('classifyFailure', () => {
  it('calls a PoisonInputError poison, also as the cause of another error, and finds its reason', () => {
    const poison = new PoisonInputError('invalid_id', 'task id holds a NUL');
    expect(classifyFailure(poison)).toBe('poison');
    const wrapped = new Error('handler failed', { cause: poison });
    expect(classifyFailure(wrapped)).toBe('poison');
    expect(poisonCause(wrapped)?.reason).toBe('invalid_id');
    // Poison wins: retrying a bad input cannot help, whatever else went wrong beside it.
    expect(classifyFailure(new PoisonInputError('invalid_id', 'x', { cause: pgError('40001') }))).toBe('poison');
  });

  it.each([
    ['40001', 'serialization_failure'],
    ['40P01', 'deadlock_detected'],
    ['57P01', 'admin_shutdown'],
    ['57P02', 'crash_shutdown'],
    ['57P03', 'cannot_connect_now'],
    ['53300', 'too_many_connections'],
    ['08000', 'connection_exception'],
    ['08001', 'sqlclient_unable_to_establish_sqlconnection'],
    ['08003', 'connection_does_not_exist'],
    ['08004', 'sqlserver_rejected_establishment_of_sqlconnection'],
    ['08006', 'connection_failure'],
  ])('retries PostgreSQL %s (%s) as transient', (code) => {
    expect(classifyFailure(pgError(code))).toBe('transient');
  });

  it.each(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH'])('retries a socket %s as transient', (code) => {
    expect(classifyFailure(socketError(code))).toBe('transient');
  });

  it.each(['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_RECOVERY', 'SQLITE_LOCKED', 'SQLITE_LOCKED_SHAREDCACHE'])(
    'retries better-sqlite3 %s as transient',
    (code) => {
      expect(classifyFailure(new BetterSqlite3.SqliteError('database is locked', code))).toBe('transient');
    },
  );

  it('retries nats.js timeouts as transient, bare or as the cause of a RequestError', () => {
    expect(classifyFailure(new errors.TimeoutError())).toBe('transient');
    expect(classifyFailure(new RequestError('request failed', { cause: new errors.TimeoutError() }))).toBe('transient');
  });

  it('retries a knex pool timeout as transient', () => {
    expect(classifyFailure(new KnexTimeoutError('Knex: Timeout acquiring a connection. The pool is probably full.'))).toBe('transient');
  });

  it.each([
    ['a plain Error', new Error('boom')],
    ['a thrown string', 'boom'],
    ['a thrown object', { message: 'boom' }],
    ['undefined', undefined],
    ['a PostgreSQL unique violation', pgError('23505')],
    ['a PostgreSQL invalid byte sequence', pgError('22021')],
    ['a SQLite constraint failure', new BetterSqlite3.SqliteError('constraint failed', 'SQLITE_CONSTRAINT')],
    ['nats.js "no responders"', new RequestError('no responders', { cause: new errors.NoRespondersError('x') })],
    ['our own compare-and-set exhaustion', new ConflictExhaustedError('task-1', 3)],
  ])('calls %s unknown (retried, bounded by MAX_DELIVER)', (_label, value) => {
    expect(classifyFailure(value)).toBe('unknown');
  });

  it('follows a cause chain to a transient failure, and stops on a cycle', () => {
    expect(classifyFailure(new Error('projection failed', { cause: new Error('query failed', { cause: pgError('40P01') }) }))).toBe('transient');
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    Object.assign(a, { cause: b });
    expect(classifyFailure(a)).toBe('unknown');
  });
});
