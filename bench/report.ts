/** Median of a list of numbers. */
export const median = (values: number[]): number => [...values].sort((a, b) => a - b)[values.length >> 1] as number;

/** Prints one aligned result line: label, value, and what it is compared with. */
export function row(label: string, value: string, note: string): void {
  console.log(`${label.padEnd(40)} ${value.padStart(12)}  ${note}`);
}
