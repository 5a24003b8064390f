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
  const key = `${core.size},${core.deflated ? 1 : 0}`;
  const made = stages.get(template)?.get(key);
  if (made !== undefined) return made;
  const stage = template.replace(CORE_PLACEHOLDER, `[${key}]`);
  // A context starts its children with one or two templates and two forms of the core.
  if (stages.size >= 4) stages.clear();
  stages.set(template, (stages.get(template) ?? new Map<string, string>()).set(key, stage));
  return stage;
}

/**
 * First stages made, by template and how the core comes: every child's
 * process object keeps its argv, so children started alike share one
 * string instead of a kilobyte each.
 */
const stages = new Map<string, Map<string, string>>();

/**
 * What the parent writes before any message: the code cache's length (4
 * bytes, big-endian), the core, the code cache (possibly empty).
 */
export function bootstrapPayload(core: Uint8Array, cache: Uint8Array | undefined): Uint8Array[] {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(cache?.length ?? 0, 0);
  return cache ? [length, core, cache] : [length, core];
}
