/** `1 task`, `3 tasks`: a count with its noun in the number it takes (`many` for irregular plurals). */
export function plural(count: number, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`;
}
