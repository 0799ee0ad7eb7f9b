/** A clarification question as the page shows it, read defensively from the agent's free-form JSON. */
export interface QuestionView {
  prompt: string;
  options: Array<{ id: string; label: string }>;
  /** Checkboxes when the agent allows several options, else radio buttons. */
  multiple: boolean;
}

const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

/**
 * Reads `question` as the listing carries it (`{id, prompt, options: [{option_id | id, label}]}`):
 * options are named by `option_id`, or `id` when it is absent (the rule respond validates against).
 */
export function questionView(question: unknown): QuestionView {
  const q = question && typeof question === 'object' && !Array.isArray(question) ? (question as Record<string, unknown>) : {};
  const options: QuestionView['options'] = [];
  for (const option of Array.isArray(q.options) ? q.options : []) {
    if (!option || typeof option !== 'object') continue;
    const o = option as Record<string, unknown>;
    const id = text(o.option_id) ?? text(o.id);
    if (id !== undefined) options.push({ id, label: text(o.label) ?? text(o.text) ?? text(o.title) ?? id });
  }
  const multiple = q.multi_select === true || q.allow_multiple === true || q.multiple === true || q.type === 'multi_select';
  return { prompt: text(q.prompt) ?? text(q.question) ?? text(q.title) ?? text(q.text) ?? '(no question text)', options, multiple };
}
