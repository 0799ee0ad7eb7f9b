/** A promise the test opens by hand: holders `await gate.opened`, the test calls `gate.open()`. */
export interface Gate {
  readonly opened: Promise<void>;
  open(): void;
}

export function createGate(): Gate {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}
