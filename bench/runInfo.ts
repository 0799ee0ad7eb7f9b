/**
 * The header every benchmark prints first: the machine, the versions of what it measures, the date.
 * Figures from two runs compare only when these agree.
 */
import os from 'node:os';
import { connect } from '@nats-io/transport-node';
import { createDatabase } from '../src/repository/database.js';

export interface RunInfo {
  date: string;
  cpu: string;
  cores: number;
  memoryGiB: number;
  loadAverage: [number, number, number];
  versions: { node: string; sqlite: string; postgres: string; natsServer: string };
}

const unreachable = (err: unknown) => `not reachable (${(err as Error).message.split('\n')[0]})`;

async function sqliteVersion(): Promise<string> {
  const db = createDatabase('sqlite::memory:');
  try {
    const [row] = (await db.knex.raw('SELECT sqlite_version() AS v')) as Array<{ v: string }>;
    return row?.v ?? 'unknown';
  } finally {
    await db.destroy();
  }
}

async function postgresVersion(url: string): Promise<string> {
  const db = createDatabase(url, { maxConnections: 1 });
  try {
    const result = (await db.knex.raw("SELECT current_setting('server_version') AS v")) as { rows: Array<{ v: string }> };
    return result.rows[0]?.v ?? 'unknown';
  } finally {
    await db.destroy();
  }
}

async function natsServerVersion(url: string): Promise<string> {
  const nc = await connect({ servers: url, timeout: 2000, reconnect: false });
  try {
    return nc.info?.version ?? 'unknown';
  } finally {
    await nc.close();
  }
}

/** Probes each service once; one that does not answer is reported as such (the bench says whether it needs it). */
export async function collectRunInfo(urls: { postgresUrl: string; natsUrl: string }): Promise<RunInfo> {
  const cpus = os.cpus();
  const [sqlite, postgres, natsServer] = await Promise.all([
    sqliteVersion().catch(unreachable),
    postgresVersion(urls.postgresUrl).catch(unreachable),
    natsServerVersion(urls.natsUrl).catch(unreachable),
  ]);
  const [l1, l5, l15] = os.loadavg();
  return {
    date: new Date().toISOString(),
    cpu: cpus[0]?.model.trim() ?? 'unknown CPU',
    cores: cpus.length,
    memoryGiB: os.totalmem() / 1024 ** 3,
    loadAverage: [l1 ?? 0, l5 ?? 0, l15 ?? 0],
    versions: { node: process.version, sqlite, postgres, natsServer },
  };
}

export function formatRunInfo(info: RunInfo): string[] {
  return [
    `date:     ${info.date}`,
    `machine:  ${info.cpu}, ${info.cores} cores, ${info.memoryGiB.toFixed(1)} GiB RAM, load average ${info.loadAverage.map((n) => n.toFixed(2)).join(' ')} (1, 5, 15 min)`,
    `versions: node ${info.versions.node}, SQLite ${info.versions.sqlite}, PostgreSQL ${info.versions.postgres}, nats-server ${info.versions.natsServer}`,
  ];
}
