/**
 * The service package's public surface: the client surface (src/client/index.ts, also shipped
 * alone as the light client package), the same typed client, schemas, reply types, subject names
 * and turn rules.
 */
export * from './client/index.js';
