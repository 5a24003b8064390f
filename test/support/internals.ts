import type { Router } from 'tendril';
import { ROUTER_SWITCH, type MessageSwitch as Switch } from '#dist/internal.js';

/** The message switch behind the public `Router` facade, for tests that must reach the routing internals. */
export function switchOf(router: Router): Switch {
  return (router as unknown as { [ROUTER_SWITCH]: Switch })[ROUTER_SWITCH];
}
