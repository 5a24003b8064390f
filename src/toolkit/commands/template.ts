/** What `` context.$`...` `` takes between `${}`: one argument each, an array several. */
export type TemplateValue = string | number | readonly (string | number)[];

function argument(value: unknown, position: number): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  throw new TypeError(
    `context.$: the value at \${} number ${position + 1} is ${value === null ? 'null' : typeof value}; only strings, numbers and arrays of them become arguments`,
  );
}

/**
 * The argument vector of a template: its literal text is split on
 * whitespace, and each `${value}` is one argument (an array is several),
 * joined to text written right against it, as in execa. Nothing is
 * interpreted by a shell, so nothing needs escaping.
 * @throws TypeError when a value is not a string, number or array of them, or the command is empty.
 */
export function templateArgv(strings: TemplateStringsArray, values: readonly unknown[]): [string, string[]] {
  const tokens: string[] = [];
  // The argument being written, while text or a value has started one.
  let current: string | undefined;
  const text = (literal: string) => {
    literal.split(/\s+/).forEach((piece, i) => {
      if (i > 0 && current !== undefined) {
        tokens.push(current);
        current = undefined;
      }
      if (piece) current = (current ?? '') + piece;
    });
  };
  strings.forEach((literal, i) => {
    text(literal);
    if (i >= values.length) return;
    const value = values[i];
    if (Array.isArray(value)) {
      value.forEach((item, j) => {
        if (j > 0) {
          tokens.push(current as string);
          current = undefined;
        }
        current = (current ?? '') + argument(item, i);
      });
    } else {
      current = (current ?? '') + argument(value, i);
    }
  });
  if (current !== undefined) tokens.push(current);
  const [file, ...args] = tokens;
  if (file === undefined || file === '') throw new TypeError('context.$: the command is empty');
  return [file, args];
}
