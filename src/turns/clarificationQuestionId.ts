/**
 * The question id of a clarification row, read from its metadata: the flat `question_id` wins, the
 * nested `question.id` is the fallback, and '' means it has none. The TypeScript twin of the SQL
 * rule `questionIdOf` (src/repository/clarifications/clarificationSql.ts): the listing, the claim and the respond
 * validation must all name a question the same way.
 */
export function questionIdFromMetadata(metadata: Record<string, unknown>): string {
  if (typeof metadata.question_id === 'string' && metadata.question_id !== '') return metadata.question_id;
  const question = metadata.question;
  if (question && typeof question === 'object' && !Array.isArray(question)) {
    const nested = (question as Record<string, unknown>).id;
    if (typeof nested === 'string') return nested;
  }
  return '';
}
