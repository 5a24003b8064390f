/** The first stage and the bytes a parent writes before the first message. */

/** Placeholder in the first stage for the deflated core's byte count. */
export const CORE_SIZE_PLACEHOLDER = '__TENDRIL_CORE_SIZE__';

/** What the first stage writes on fd 4 once it runs: the parent may now send the core. */
export const HELLO = 'tendril:1\n';

/** The first stage with the core's byte count filled in. */
export function firstStage(template: string, coreSize: number): string {
  return template.replace(CORE_SIZE_PLACEHOLDER, String(coreSize));
}

/**
 * What the parent writes before any message: the code cache's length (4
 * bytes, big-endian), the deflated core, the code cache (possibly empty).
 */
export function bootstrapPayload(core: Uint8Array, cache: Uint8Array | undefined): Uint8Array[] {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(cache?.length ?? 0, 0);
  return cache ? [length, core, cache] : [length, core];
}
