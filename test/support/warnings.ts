import type { Router, RouterWarning } from 'tendril';

/** The router's warnings of `code` from now on, as they come (a list that grows). */
export function collectWarnings(router: Router, code: RouterWarning['code']): RouterWarning[] {
  const seen: RouterWarning[] = [];
  router.on('warning', (warning) => warning.code === code && seen.push(warning));
  return seen;
}
