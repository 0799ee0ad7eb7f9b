/**
 * A reader of the project's Dockerfile, enough for the image checks: instructions in order, with
 * continuation lines joined and comments dropped. It knows the shell form and the JSON (exec) form
 * of arguments, nothing of heredocs or parser directives, which the Dockerfile does not use.
 */

export interface Instruction {
  /** Upper case: `FROM`, `RUN`, `COPY` ... */
  keyword: string;
  /** The rest of the instruction, continuations joined by a space. */
  args: string;
  /** 1-based line where the instruction starts. */
  line: number;
}

export function parseDockerfile(text: string): Instruction[] {
  const instructions: Instruction[] = [];
  let pending: { text: string; line: number } | undefined;
  text.split('\n').forEach((raw, index) => {
    const line = raw.trimEnd();
    if (!pending && (line.trim() === '' || line.trimStart().startsWith('#'))) return;
    // Docker drops comment lines inside a continued instruction too.
    if (pending && line.trimStart().startsWith('#')) return;
    const continued = line.endsWith('\\');
    const body = continued ? line.slice(0, -1) : line;
    pending = pending ? { text: `${pending.text} ${body.trim()}`, line: pending.line } : { text: body.trim(), line: index + 1 };
    if (continued) return;
    const [keyword = '', ...rest] = pending.text.split(/\s+/);
    instructions.push({ keyword: keyword.toUpperCase(), args: rest.join(' '), line: pending.line });
    pending = undefined;
  });
  if (pending) throw new Error(`Dockerfile line ${pending.line}: continued past the end of the file`);
  return instructions;
}

/** The arguments of an exec-form (`["a", "b"]`) or shell-form instruction, as a list of words. */
export function argumentList(args: string): string[] {
  const trimmed = args.trim();
  if (trimmed.startsWith('[')) return JSON.parse(trimmed) as string[];
  return trimmed.split(/\s+/).filter(Boolean);
}

/** `ENV K=V K2=V2` (or the old `ENV K V`) as pairs; values may be double-quoted. */
export function envPairs(args: string): Array<[string, string]> {
  const trimmed = args.trim();
  if (!/^[A-Za-z_][A-Za-z0-9_]*=/.test(trimmed)) {
    const [key = '', ...value] = trimmed.split(/\s+/);
    return [[key, value.join(' ')]];
  }
  const pairs: Array<[string, string]> = [];
  for (const match of trimmed.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)/g)) {
    const value = match[2]!;
    pairs.push([match[1]!, value.startsWith('"') ? (JSON.parse(value) as string) : value]);
  }
  return pairs;
}
