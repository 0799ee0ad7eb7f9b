import { describe, expect, it } from 'vitest';
import { normalizeIndexDefinition } from '../../src/repository/schema/indexInspection.js';

describe('normalizeIndexDefinition', () => {
  it('reads two spellings of one index alike: name, IF NOT EXISTS, schema, quotes, spacing and case aside', () => {
    const knexSqlite = 'CREATE INDEX `pp_messages_turn_type` on `task_session_messages` (`turn_id`, `type`)';
    const postgres = 'CREATE INDEX pp_messages_turn_type ON t_0123.task_session_messages USING btree (turn_id, type)';
    const ours = 'create index if not exists other_name ON "task_session_messages"(turn_id,type)';
    expect(normalizeIndexDefinition(knexSqlite)).toBe('on task_session_messages(turn_id,type)');
    expect(normalizeIndexDefinition(ours)).toBe(normalizeIndexDefinition(knexSqlite));
    expect(normalizeIndexDefinition(postgres)).toBe('on task_session_messagesusingbtree(turn_id,type)');
  });

  it('keeps what changes the index: its keys, their order and direction, UNIQUE, the table, and string literals as written', () => {
    const base = normalizeIndexDefinition("CREATE INDEX i ON t (a, json_extract(metadata, '$.pending_id'))");
    expect(normalizeIndexDefinition("CREATE INDEX i ON t (json_extract(metadata, '$.pending_id'), a)")).not.toBe(base);
    expect(normalizeIndexDefinition("CREATE INDEX i ON t (a DESC, json_extract(metadata, '$.pending_id'))")).not.toBe(base);
    expect(normalizeIndexDefinition("CREATE UNIQUE INDEX i ON t (a, json_extract(metadata, '$.pending_id'))")).not.toBe(base);
    expect(normalizeIndexDefinition("CREATE INDEX i ON u (a, json_extract(metadata, '$.pending_id'))")).not.toBe(base);
    expect(normalizeIndexDefinition("CREATE INDEX i ON t (a, json_extract(metadata, '$.Pending_Id'))")).not.toBe(base);
    expect(normalizeIndexDefinition("CREATE INDEX i ON t (a, json_extract(metadata, '$.pending_id')) WHERE a IS NOT NULL")).not.toBe(base);
    expect(normalizeIndexDefinition("CREATE INDEX IF NOT EXISTS j ON t(a,json_extract(metadata,'$.pending_id'))")).toBe(base);
  });
});
