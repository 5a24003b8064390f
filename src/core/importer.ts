import * as vm from 'node:vm';
import { encode } from './codec.js';
import { GET_MODULE } from './handles.js';
import type { Message } from './message.js';
import type { Policy, Router } from './router.js';
import type { Stream } from './stream.js';

/** Name under which tendril's bundled modules ask for the core they run against. */
export const CORE_MODULE_ID = 'tendril:core';

/** A GET_MODULE request: the name of a bundle, e.g. `'tendril:connection'`. */
export type ModuleRequest = [name: string];
/** A GET_MODULE reply: `[0, source]`, or `[1, reason]` when it cannot be served. */
export type ModuleReply = [0, string] | [1, string];

/** Admits GET_MODULE requests only from child streams: modules flow down the tree, never up. */
export function fromChildStream(router: Router): Policy {
  return (_message: Message, stream: Stream | undefined) => stream !== undefined && stream !== router.parentStream;
}

/**
 * Loads tendril's own modules that are not part of the core (the connection
 * methods) in a child context. Sources come from the parent on first use
 * and are cached, and this context serves its own children from the cache:
 * each source crosses each stream at most once.
 */
export class Importer {
  private readonly sources = new Map<string, Promise<string>>();
  private readonly modules = new Map<string, Promise<unknown>>();

  /**
   * @param core the core's exports, handed to modules that import `tendril:core`.
   * @param requireFn the context's `require`, for Node's built-in modules.
   */
  constructor(
    private readonly router: Router,
    private readonly core: object,
    private readonly requireFn: (id: string) => unknown,
  ) {
    router.addHandler((message) => this.onGetModule(message), {
      handle: GET_MODULE,
      policy: fromChildStream(router),
    });
  }

  /** The source of module `name`, from the cache or the parent. */
  source(name: string): Promise<string> {
    let source = this.sources.get(name);
    if (!source) {
      source = this.router
        .request(this.router.parentId, GET_MODULE, encode([name] satisfies ModuleRequest), {
          what: `fetching module ${name}`,
        })
        .then((reply) => {
          const [status, value] = reply.unpack() as ModuleReply;
          if (status !== 0) throw new Error(`module ${name} is not available: ${value}`);
          return value;
        });
      // A failed fetch is not cached, so a later attempt asks again.
      source.catch(() => this.sources.delete(name));
      this.sources.set(name, source);
    }
    return source;
  }

  /** Loads (once) and returns the exports of tendril module `name`. */
  load<T>(name: string): Promise<T> {
    let loaded = this.modules.get(name);
    if (!loaded) {
      loaded = this.source(name).then((source) => {
        const factory = vm.runInThisContext(source, { filename: name }) as (req: (id: string) => unknown) => unknown;
        return factory((id) => (id === CORE_MODULE_ID ? this.core : this.requireFn(id)));
      });
      loaded.catch(() => this.modules.delete(name));
      this.modules.set(name, loaded);
    }
    return loaded as Promise<T>;
  }

  private onGetModule(message: Message): void {
    const request = message.unpack() as ModuleRequest;
    const name = Array.isArray(request) && typeof request[0] === 'string' ? request[0] : '';
    this.source(name).then(
      (source) => this.router.reply(message, [0, source] satisfies ModuleReply),
      (error: Error) => this.router.reply(message, [1, error.message] satisfies ModuleReply),
    );
  }
}
