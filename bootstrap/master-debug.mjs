// `debug` as the master's bundle uses it: the program's own copy of the
// package (so `require('debug').enable('tendril:*')` in the program reaches
// tendril's namespaces), loaded the first time a logger is used or asked
// whether it is enabled rather than when tendril is imported: loading it
// probes the terminal, which a script should not pay for before it starts
// its first context.
import { createRequire } from 'node:module';

let createDebug;

function load() {
  createDebug ??= createRequire(import.meta.url)('debug');
  return createDebug;
}

export default function lazyDebug(namespace) {
  let instance;
  const get = () => {
    instance ??= load()(namespace);
    return instance;
  };
  const log = (...args) => get()(...args);
  Object.defineProperty(log, 'enabled', { get: () => get().enabled });
  Object.defineProperty(log, 'namespace', { value: namespace });
  return log;
}
