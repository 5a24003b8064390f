/** The first stage and the bytes a parent writes before the first message. */

/** Placeholder in the first stage for how the core comes (see `firstStage`). */
export const CORE_PLACEHOLDER = '__TENDRIL_CORE__';

/** How the core comes to a child. */
export interface CoreDelivery {
  /** Its byte count as sent. */
  readonly size: number;
  /** Deflated, or the source as it is. */
  readonly deflated: boolean;
}

/** What the first stage writes on fd 4 once it runs: the parent may now send the core. */
export const HELLO = 'tendril:1\n';

/**
 * The first stage with how the core comes filled in (`[size, deflated]`,
 * the flag as 1 or 0). Whether the child looks for the core's code cache
 * on its target is the template's: the Router picks the variant with that
 * part for its targetCodeCache, and every context passes on the one it was
 * started with.
 */
export function firstStage(template: string, core: CoreDelivery): string {
  return template.replace(CORE_PLACEHOLDER, `[${core.size},${core.deflated ? 1 : 0}]`);
}

/**
 * What the parent writes before any message: the code cache's length (4
 * bytes, big-endian), the core, the code cache (possibly empty).
 */
export function bootstrapPayload(core: Uint8Array, cache: Uint8Array | undefined): Uint8Array[] {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(cache?.length ?? 0, 0);
  return cache ? [length, core, cache] : [length, core];
}
