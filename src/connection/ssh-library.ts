/** The ssh2 library, which only the SSH methods use. */
import { importPackage } from './packages.js';

/** ssh2, loaded when first needed: a context that only starts local children never pays for it. */
export type Ssh2 = typeof import('ssh2');
let ssh2: Ssh2 | undefined;
/** ssh2, imported on the first call (found as `importPackage` finds packages). */
export async function loadSsh2(): Promise<Ssh2> {
  ssh2 ??= await importPackage<Ssh2>('ssh2');
  return ssh2;
}
