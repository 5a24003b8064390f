import * as fs from 'node:fs';

/**
 * Keeps the resolver behind `dns.resolve*()` in step with
 * /etc/resolv.conf. `dns.lookup()` goes through the C library, which reads
 * the file again when it changes; `dns.resolve*()`, `dns.Resolver` and
 * `dns.getServers()` use c-ares, which keeps the name servers it read when
 * the process started, so after a call (or anything else) rewrites the
 * file, a long-lived context would go on asking the old ones (Mitogen
 * calls `res_init()` for the same reason). Checked as each user call
 * starts, but only once user code has loaded `dns`: one `stat()`.
 */
export class ResolverWatch {
  /** The file's identity and time when the servers were last set; undefined until `dns` is used. */
  private stamp: string | undefined;

  /**
   * @param requireFn the context's own `require`, for `dns`.
   * @param path the file to watch. Default `/etc/resolv.conf`.
   */
  constructor(
    private readonly requireFn: (id: string) => unknown,
    private readonly path = '/etc/resolv.conf',
  ) {}

  /** Notes that user code loaded the built-in `name`: from `dns` on, calls check the file. */
  loaded(name: string): void {
    if (this.stamp === undefined && /^(node:)?dns(\/promises)?$/.test(name)) this.stamp = '';
  }

  /** Gives the default resolver the servers of the current file, if it changed since last time. */
  check(): void {
    if (this.stamp === undefined) return;
    let stamp: string;
    try {
      const stat = fs.statSync(this.path);
      stamp = `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}`;
    } catch {
      stamp = 'missing';
    }
    if (stamp === this.stamp) return;
    try {
      const dns = this.requireFn('dns') as typeof import('node:dns');
      // A new c-ares channel reads the file again; its servers become the default resolver's.
      const servers = new dns.Resolver().getServers();
      dns.setServers(servers);
      dns.promises?.setServers?.(servers);
      this.stamp = stamp;
    } catch {
      // Refused while queries are in flight: tried again as the next call starts.
    }
  }
}
