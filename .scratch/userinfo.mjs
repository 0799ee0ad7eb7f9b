import { connect } from '@nats-io/transport-node';
const nc = await connect({ servers: process.argv[2] ?? 'nats://127.0.0.1:4222', user: process.argv[3], pass: process.argv[4], inboxPrefix: '_INBOX_worker' });
try { const m = await nc.request('$SYS.REQ.USER.INFO', '', { timeout: 2000 }); console.log(m.string()); } catch (e) { console.log('ERR', e.message); }
console.log(nc.info.version, nc.info.max_payload);
await nc.close();
