/**
 * What a fleet runs across: targets the pool connects (plain data) or
 * contexts the program already holds, each checked before anything starts
 * and given the label its outcome and errors carry.
 */
import { Context } from '../context.js';
import { type PoolTarget, parseTarget } from '../pool/target.js';

/** One target of a fleet: a pool target (connected through the pool) or a `Context` (used as it is). */
export type FleetTarget = PoolTarget | Context;

/**
 * Checks `target` (as the pool would) and gives its label: a `Context`'s
 * name; a target's `name`, else the pool's label for it (`local`,
 * `ssh:deploy@web1:22`, `sudo:root`...); followed by ` via <label of the via>`.
 * @param where what it was passed to, for errors (e.g. `'router.fleet() targets[3]'`).
 * @throws InvalidOptionError naming the bad field.
 */
export function labelOf(target: unknown, where: string): string {
  if (target instanceof Context) return target.name;
  parseTarget(target, where); // the whole chain, with the pool's own checks
  return label(target as PoolTarget, where);
}

function label(target: PoolTarget, where: string): string {
  const { via, name } = target;
  // The pool's label of the target alone: method, user, host, port.
  const own = name ?? parseTarget({ ...target, name: undefined, via: undefined }, where).label;
  if (via === undefined) return own;
  return `${own} via ${via instanceof Context ? via.name : label(via, where)}`;
}
