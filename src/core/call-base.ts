import { fileURLToPath } from 'node:url';

/** A file URL as a path; a path or specifier unchanged. */
export function toPathOrSpecifier(module: string | URL): string {
  return module instanceof URL || module.startsWith('file:') ? fileURLToPath(module) : module;
}

/** Name of the file a call resolves from when its base is a directory. */
export const CALL_FILE = '[tendril call]';

/** The file name a call's `require()` resolves from: a name in its base directory. */
export function callOrigin(base: string): string {
  return `${base.replace(/(?<!\/)\/+$/, '')}/${CALL_FILE}`;
}
