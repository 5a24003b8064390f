import { RateLimit } from './rate-limit.js';
import { escapeTerminalText, KEEP_NEWLINES } from './terminal-text.js';

/** A refused or dropped message, reported through the router's `warning` event. */
export interface RouterWarning {
  /**
   * Kind of problem: `'forged-id'`, `'policy'`, `'bad-route'`, `'handler'`
   * (a handler failed or got a malformed request), `'module-refused'`,
   * `'flood'` (dead replies or forwarded messages dropped past a bound) or
   * `'quota'` (a context asked for more IDs than its subtree may have).
   */
  code: 'forged-id' | 'policy' | 'bad-route' | 'handler' | 'module-refused' | 'flood' | 'quota';
  /**
   * What happened, naming the contexts involved. Escaped for a terminal
   * (`escapeTerminalText`, newlines kept): it quotes what children sent
   * (a module they asked for, a handler's error), and is printed as it is.
   */
  message: string;
}

/**
 * How often warnings are reported: a burst of 100, then 100 a second per
 * code; the next report says how many were left out.
 */
export class WarningLimits {
  private readonly limits = new Map<string, RateLimit>();
  private readonly reported = new Map<string, number>();

  /** The text to report for `message` now, escaped for a terminal, or undefined when it is left out. */
  admit(code: RouterWarning['code'], message: string): string | undefined {
    let limit = this.limits.get(code);
    if (!limit) {
      limit = new RateLimit(100, 100);
      this.limits.set(code, limit);
    }
    const before = limit.dropped;
    if (!limit.take()) return undefined;
    const left = before - (this.reported.get(code) ?? 0);
    this.reported.set(code, before);
    const text = escapeTerminalText(message, KEEP_NEWLINES);
    return left > 0 ? `${text} (and ${left} more like it not reported)` : text;
  }
}
