/** One progress line on stderr: rewritten in place on a terminal, a line per update otherwise. */
export function createProgressReporter(stream: NodeJS.WriteStream = process.stderr) {
  let lastLength = 0;
  return {
    update(text: string) {
      if (stream.isTTY) {
        stream.write(`\r${text.padEnd(lastLength)}`);
        lastLength = text.length;
      } else stream.write(`${text}\n`);
    },
    done() {
      if (stream.isTTY && lastLength > 0) stream.write('\n');
      lastLength = 0;
    },
  };
}
