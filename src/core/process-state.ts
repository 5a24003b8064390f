/**
 * A context is one interpreter reused for every call, so what one call
 * changes of the process the next would see (Mitogen's runner restores
 * the same after each task). What a call changes of the process is undone
 * when it ends: working directory, environment, argv, umask, exit code,
 * title, and listeners it added to `process` (or removed of tendril's).
 * Calls run concurrently and share the process: a change lasts only until
 * a call ends, whichever call that is. What cannot be put back (global
 * prototypes, a module's own state) is for `isolate: true`.
 *
 * Checking must cost next to nothing per call: the environment is watched
 * through a proxy that notes writes (reading all of it back costs about
 * 14 µs with 35 variables), and listeners through `newListener` and
 * `removeListener`.
 */
import * as fs from 'node:fs';

/** `process.argv` during calls: no first stage's arguments, nothing a CLI parser would take for options. */
export const CALL_ARGV_NAME = '<call>';

/** Marks a listener on `process` as tendril's own, so restoring never removes it. */
export const OWN_LISTENER: unique symbol = Symbol.for('tendril.ownListener') as never;

/** The context's watch on its process, once it has started watching. */
let watching: ProcessState | undefined;

/**
 * A plain copy of the environment as it is now, for a child process: the
 * copy taken at start when no call has changed the environment since the
 * last restore (reading `process.env` through its proxy costs about 1 µs a
 * variable), else read from `process.env`.
 */
export function environmentNow(): Record<string, string | undefined> {
  return watching ? watching.environmentNow() : { ...process.env };
}

/**
 * The process's umask, read without setting it (`process.umask()` reads
 * by setting, which leaves a moment with another mask for every thread):
 * the one taken at start while no call has set one since the last
 * restore, else the kernel's from /proc; undefined where there is no
 * /proc to read.
 */
export function currentUmask(): number | undefined {
  const known = watching?.umaskNow();
  if (known !== undefined) return known;
  try {
    const line = /^Umask:\s*([0-7]+)$/m.exec(fs.readFileSync('/proc/self/status', 'latin1'));
    if (line) return Number.parseInt(line[1] as string, 8);
  } catch {
    // No /proc (not Linux).
  }
  return undefined;
}

// biome-ignore lint/suspicious/noExplicitAny: listeners of every event.
type Listener = (...args: any[]) => void;

/** The process as it was when the context became ready, and what calls changed of it since. */
export class ProcessState {
  private readonly cwd = process.cwd();
  private readonly env: Record<string, string | undefined>;
  private readonly realEnv = process.env;
  private readonly envProxy: NodeJS.ProcessEnv;
  private readonly argv: string[];
  private readonly umask = process.umask();
  /**
   * Set when a call passed a mask to `process.umask()`, watched through a
   * wrapper because reading the mask back after every call takes two syscalls.
   */
  private umaskChanged = false;
  /** Node's own `process.umask`, and the wrapper that stands in for it. */
  private readonly umaskOf: typeof process.umask;
  private readonly umaskWatch: typeof process.umask;
  private readonly title: string;
  private envChanged = false;
  /** Listeners added to `process` since the last restore, and tendril's own that were removed. */
  private added: [string | symbol, Listener][] = [];
  private removed: [string | symbol, Listener][] = [];
  private restoring = false;
  /** The `newListener` and `removeListener` listeners that note what calls add and remove. */
  private readonly hooks: [Listener, Listener];

  /** Takes the process as it is now as what calls are to leave, sets the calls' argv, and starts watching. */
  constructor() {
    this.env = { ...process.env };
    this.argv = [process.execPath, CALL_ARGV_NAME];
    process.argv = this.argv.slice();
    this.title = process.title;
    const noteChange = () => {
      this.envChanged = true;
    };
    this.envProxy = new Proxy(this.realEnv, {
      set(target, key, value) {
        noteChange();
        return Reflect.set(target, key, value);
      },
      deleteProperty(target, key) {
        noteChange();
        return Reflect.deleteProperty(target, key);
      },
      defineProperty(target, key, descriptor) {
        noteChange();
        return Reflect.defineProperty(target, key, descriptor);
      },
    });
    process.env = this.envProxy;
    const umaskOf = process.umask;
    this.umaskOf = umaskOf;
    const noteUmask = () => {
      this.umaskChanged = true;
    };
    this.umaskWatch = function umask(this: unknown, ...args: unknown[]) {
      if (args[0] !== undefined) noteUmask();
      return (umaskOf as (...a: unknown[]) => number).apply(this, args);
    } as typeof process.umask;
    process.umask = this.umaskWatch;
    const baseline = new Set<Listener>();
    for (const event of process.eventNames()) {
      for (const listener of process.listeners(event as 'exit')) baseline.add(listener as Listener);
    }
    const newListener = (event: string | symbol, listener: Listener) => {
      if (!this.restoring && !isOwnListener(listener)) this.added.push([event, listener]);
    };
    const removeListener = (event: string | symbol, listener: Listener) => {
      if (this.restoring) return;
      // One added and removed since the last restore is forgotten: the list holds no more than is on process.
      const index = this.added.findIndex(([e, l]) => e === event && l === listener);
      if (index !== -1) this.added.splice(index, 1);
      else if (baseline.has(listener) || isOwnListener(listener)) this.removed.push([event, listener]);
    };
    this.hooks = [markOwn(newListener), markOwn(removeListener)];
    baseline.add(newListener).add(removeListener);
    process.on('newListener', newListener);
    process.on('removeListener', removeListener);
    watching = this;
  }

  /** See the exported `environmentNow`. */
  environmentNow(): Record<string, string | undefined> {
    return process.env === this.envProxy && !this.envChanged ? Object.assign({}, this.env) : { ...process.env };
  }

  /** The umask taken at start while no call has set one since the last restore, else undefined. */
  umaskNow(): number | undefined {
    return this.umaskChanged || process.umask !== this.umaskWatch ? undefined : this.umask;
  }

  /** Puts back what calls changed; cheap when they changed nothing. */
  restore(): void {
    if (process.cwd() !== this.cwd) {
      try {
        process.chdir(this.cwd);
      } catch {
        // The directory is gone; staying where the call left it is all that can be done.
      }
    }
    if (process.env !== this.envProxy || this.envChanged) this.restoreEnv();
    const argv = process.argv;
    if (argv.length !== 2 || argv[0] !== this.argv[0] || argv[1] !== CALL_ARGV_NAME) process.argv = this.argv.slice();
    if (this.umaskChanged || process.umask !== this.umaskWatch) {
      this.umaskChanged = false;
      process.umask = this.umaskWatch;
      const umaskOf = this.umaskOf as (mask?: number) => number;
      if (umaskOf.call(process) !== this.umask) umaskOf.call(process, this.umask);
    }
    if (process.exitCode !== undefined) process.exitCode = undefined;
    if (process.title !== this.title) {
      try {
        process.title = this.title;
      } catch {
        // Not permitted everywhere; purely cosmetic.
      }
    }
    if (this.added.length > 0 || this.removed.length > 0) this.restoreListeners();
    // process.removeAllListeners() takes the hooks too, silently for the last one.
    if (!(process.listeners('removeListener' as 'exit') as Listener[]).includes(this.hooks[1])) this.reattachHooks();
  }

  private reattachHooks(): void {
    this.restoring = true;
    try {
      const [added, removed] = this.hooks;
      if (!(process.listeners('newListener' as 'exit') as Listener[]).includes(added)) process.on('newListener', added);
      process.on('removeListener', removed);
    } finally {
      this.restoring = false;
    }
  }

  private restoreEnv(): void {
    process.env = this.envProxy;
    this.envChanged = false;
    const env = this.realEnv;
    for (const key of Object.keys(env)) {
      // biome-ignore lint/suspicious/noPrototypeBuiltins: Object.hasOwn is missing on the Node 12 to 16.8 a context may run.
      if (!Object.prototype.hasOwnProperty.call(this.env, key)) delete env[key];
    }
    for (const key of Object.keys(this.env)) {
      if (env[key] !== this.env[key]) env[key] = this.env[key];
    }
  }

  private restoreListeners(): void {
    const added = this.added;
    const removed = this.removed;
    this.added = [];
    this.removed = [];
    this.restoring = true;
    try {
      for (const [event, listener] of added) process.removeListener(event as 'exit', listener);
      for (const [event, listener] of removed) {
        if (!process.listeners(event as 'exit').includes(listener as never)) process.on(event as 'exit', listener);
      }
    } finally {
      this.restoring = false;
    }
  }
}

/** Marks `listener` as tendril's own (see `OWN_LISTENER`) and returns it. */
export function markOwn<F extends (...args: never[]) => unknown>(listener: F): F {
  (listener as unknown as Record<symbol, boolean>)[OWN_LISTENER] = true;
  return listener;
}

/** Whether `listener` is tendril's own (see `markOwn`). */
export function isOwnListener(listener: unknown): boolean {
  return typeof listener === 'function' && (listener as unknown as Record<symbol, boolean>)[OWN_LISTENER] === true;
}
