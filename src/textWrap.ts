/**
 * `text` broken at spaces into lines of at most `width` columns (a longer word stands alone), each
 * starting with `indent`; the first with `first` instead when given (a hanging indent).
 */
export function wrapText(text: string, width: number, indent: string, first = indent): string {
  const lines: string[] = [];
  let line = first;
  let empty = true;
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (!empty && line.length + 1 + word.length > width) {
      lines.push(line);
      line = indent;
      empty = true;
    }
    line += empty ? word : ` ${word}`;
    empty = false;
  }
  lines.push(line);
  return lines.join('\n');
}
