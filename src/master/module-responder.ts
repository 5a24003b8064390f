import { GET_MODULE } from '../core/handles.js';
import { fromChildStream, type ModuleReply, type ModuleRequest } from '../core/importer.js';
import { logger } from '../core/log.js';
import type { Message } from '../core/message.js';
import type { Router } from '../core/router.js';
import { readAsset } from './assets.js';

const debug = logger('responder');

/** tendril's own modules that children may ask for, by name, and the built file that holds each. */
const TENDRIL_MODULES: Readonly<Record<string, string>> = {
  'tendril:connection': 'connection.js',
};

/**
 * The master's answer to GET_MODULE: the only context that reads module
 * source from disk. Serves only the names it knows, never a path a child
 * chose.
 */
export class ModuleResponder {
  private readonly cache = new Map<string, string>();
  /** Requests answered, successfully or not. */
  requests = 0;

  /** @param router the master's router; GET_MODULE is served on it. */
  constructor(private readonly router: Router) {
    router.addHandler((message) => this.onGetModule(message), {
      handle: GET_MODULE,
      policy: fromChildStream(router),
    });
  }

  private onGetModule(message: Message): void {
    this.requests++;
    const request = message.unpack() as ModuleRequest;
    const name = Array.isArray(request) ? request[0] : undefined;
    const file = typeof name === 'string' && Object.hasOwn(TENDRIL_MODULES, name) ? TENDRIL_MODULES[name] : undefined;
    if (!file) {
      debug('refused GET_MODULE %o from context %d', name, message.src);
      this.router.reply(message, [1, `no module named ${JSON.stringify(name)} is served`] satisfies ModuleReply);
      return;
    }
    let source = this.cache.get(file);
    if (source === undefined) {
      source = readAsset(file).toString('utf8');
      this.cache.set(file, source);
    }
    this.router.reply(message, [0, source] satisfies ModuleReply);
  }
}
