import { readdirSync, readFileSync } from 'node:fs';

/** One process as /proc shows it (Linux). */
export interface ProcessEntry {
  pid: number;
  ppid: number;
  command: string;
}

function entry(pid: number): (ProcessEntry & { pgid: number; state: string }) | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name sits in parentheses and may hold spaces: the fields after it are fixed.
    const [state, ppid, pgid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
    return { pid, ppid: Number(ppid), pgid: Number(pgid), state: state!, command };
  } catch {
    return undefined; // gone between the listing and the read
  }
}

/** The live processes (zombies excluded) of a process group, such as a detached child and its descendants. */
export function processGroup(pgid: number): ProcessEntry[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map((name) => entry(Number(name)))
    .filter((p): p is NonNullable<typeof p> => p !== undefined && p.pgid === pgid && p.state !== 'Z')
    .map(({ pid, ppid, command }) => ({ pid, ppid, command }));
}

/** Whether `pid` names a live process (not a zombie). */
export function isRunning(pid: number): boolean {
  const p = entry(pid);
  return p !== undefined && p.state !== 'Z';
}
