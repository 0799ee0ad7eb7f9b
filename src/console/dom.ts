/** A tiny element builder: the page has no framework, and these few lines keep its views readable. */
type Attributes = Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>;
type Child = Node | string | number | null | undefined | false;

/**
 * `h('button', { 'data-action': 'retry', onclick: retry }, 'Retry')`. An attribute whose value is
 * false, null or undefined is left out; `true` sets it empty; `on<event>` attributes are listeners.
 */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Attributes = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (typeof value === 'function') element.addEventListener(name.slice(2), value);
    else if (value === true) element.setAttribute(name, '');
    else if (value !== false && value !== null && value !== undefined) element.setAttribute(name, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    element.append(typeof child === 'number' ? String(child) : child);
  }
  return element;
}

/** The element with `id`, which the page's HTML declares (a missing one is a bug of the page). */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (!element) throw new Error(`the console page has no #${id}`);
  return element as T;
}
