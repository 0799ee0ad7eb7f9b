import { describe, expect, it } from 'vitest';
import { dialectFor } from '../../src/repository/dialect.js';
import { classifyMetadata } from '../../src/repository/doctor/metadataScan.js';
import { classifyTimestampText } from '../../src/repository/doctor/timestampTextForms.js';
import { parseSampleRows } from '../../src/bin/doctorCommand.js';

describe('classifyTimestampText', () => {
  it.each([
    ['2026-03-04T05:06:07.500000000Z', 'canonical'],
    ['2026-03-04 05:06:07.5+00:00', 'kandev'],
    ['2026-03-04 05:06:07.123456789+00:00', 'kandev'],
    ['2026-03-04 05:06:07+00:00', 'kandev'],
    ['2026-03-04 05:06:07', 'sqlite_current_timestamp'],
    ['2026-03-04T05:06:07.500Z', 'other'],
    ['2026-03-04T05:06:07Z', 'other'],
    ['2026-03-04 05:06:07.5+02:00', 'other'],
    ['2026-03-04 05:06:07.1234567891+00:00', 'other'],
    ['2026-03-04', 'other'],
    ['', 'other'],
    [1772600767, 'other'],
  ])('%j is %s', (value, form) => {
    expect(classifyTimestampText(value)).toBe(form);
  });
});

describe('classifyMetadata', () => {
  it.each([
    [null, 'sqlite', 'null'],
    ['', 'sqlite', 'malformed'],
    ['{"a": 1', 'sqlite', 'malformed'],
    [42, 'sqlite', 'malformed'],
    ['[]', 'sqlite', 'not_object'],
    ['null', 'sqlite', 'not_object'],
    ['"text"', 'sqlite', 'not_object'],
    ['{}', 'sqlite', 'object'],
    ['{"a": "\\u0000"}', 'sqlite', 'object'],
    ['{"a": "\\u0000"}', 'postgres', 'malformed'],
    ['{"\\u0000": 1}', 'postgres', 'malformed'],
    ['{"a": ["\\ud800"]}', 'postgres', 'malformed'],
    ['{"a": "\\ud83d\\ude00"}', 'postgres', 'object'],
    ['{"a": "\\\\u0000"}', 'postgres', 'object'],
  ] as const)('%j on %s is %s', (raw, dialect, state) => {
    expect(classifyMetadata(raw, dialectFor(dialect)).state).toBe(state);
  });
});

describe('doctor --sample', () => {
  it('takes a whole number of rows from 1 to 1,000,000, defaulting to 1000', () => {
    expect(parseSampleRows(undefined)).toEqual({ ok: true, rows: 1000 });
    expect(parseSampleRows('25')).toEqual({ ok: true, rows: 25 });
    for (const bad of ['0', '-1', '2.5', 'many', '1000001', '']) expect(parseSampleRows(bad).ok).toBe(false);
  });
});
