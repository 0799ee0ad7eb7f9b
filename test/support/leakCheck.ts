import { afterAll } from 'vitest';

// Registered before any test file's hooks, so it runs after them: by then every pool, NATS
// connection, server and child process the file opened must be closed.
const LEAKY = new Set(['TCPSocketWrap', 'TCPServerWrap', 'ProcessWrap']);

afterAll(async () => {
  for (let i = 0; i < 20; i++) {
    const open = process.getActiveResourcesInfo().filter((r) => LEAKY.has(r));
    if (open.length === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  const open = process.getActiveResourcesInfo().filter((r) => LEAKY.has(r));
  throw new Error(`test file left resources open (sockets, servers or child processes): ${open.join(', ')}`);
});
