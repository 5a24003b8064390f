/**
 * `tendril/child`: for code running inside a context (a function shipped
 * with `context.call()`, a module loaded with `context.import()`). In a
 * child, module forwarding answers `require('tendril/child')` and
 * `import ... from 'tendril/child'` with the core already running there
 * (src/core/services.ts has its `thisContext`). This file is the entry the
 * master loads, where there is no context to return: it loads nothing of
 * the core, so a program that imports both entries pays nothing for this one.
 *
 * @packageDocumentation
 */
import { NOT_IN_A_CHILD } from './core/child-entry.js';
import type { ThisContext } from './core/services.js';

export type * from './api/context-types.js';
export { serviceName } from './core/child-entry.js';
export type { Context } from './core/context.js';
export type { ThisContext } from './core/services.js';

/**
 * The context this code runs in, when it runs in a child: its `id` and
 * `name`, handles on its `parent` and on the `master` (to call their
 * services), and `registerService` to offer services of its own.
 *
 * ```js
 * // in a function shipped to a child:
 * const { master } = require('tendril/child').thisContext();
 * ```
 * @throws Error in the master: there, call `registerService` on the Router you created.
 */
export function thisContext(): ThisContext {
  throw new Error(NOT_IN_A_CHILD);
}

/**
 * The signal of the call running now, in a child: it aborts when the
 * caller's `timeout` passes or its `signal` aborts. Call it before the
 * function's first `await` (calls run concurrently, so only their start
 * tells them apart) and keep it; a shipped `function` also has it as
 * `this.signal` (see `CallThis`).
 *
 * ```js
 * // in a function shipped to a child:
 * const signal = require('tendril/child').callSignal();
 * await require('node:timers/promises').setTimeout(5000, null, { signal });
 * ```
 * @throws Error in the master, and in a child outside a call's synchronous start.
 */
export function callSignal(): AbortSignal {
  throw new Error('callSignal() is for code running in a call in a child context');
}
