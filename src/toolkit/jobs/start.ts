/**
 * The master's half of starting a job: options checked and the function
 * prepared (synchronously, while the caller's frame is on the stack: it
 * is the default base), then one call to the context's `jobStart`.
 */
import { CALL_TOOLKIT, type Context, prepareJobCall } from '../../core/context.js';
import { InvalidOptionError } from '../../core/errors.js';
import {
  abortSignal,
  checkOperationOptions,
  integer,
  location,
  MAX_TIMER,
  milliseconds,
  type OperationOptions,
  optionsObject,
  text,
} from '../../core/options.js';
import { checkArgv } from '../commands/exec.js';
import { environment, MAX_PATH } from '../commands/options.js';
import type { CommandJobResult } from './errors.js';
import { Job, jobErrorOf } from './job.js';
import { JOB_ID, type JobSpec, parseJobStatus } from './protocol.js';

/** Options of `context.startJob()` and `context.execJob()`. */
export interface JobOptions {
  /**
   * Kill the job's process group (SIGTERM, then SIGKILL after `grace`)
   * this many ms after it started; its state is then `timed-out`.
   * Required: `'none'` asks for a job that may run for ever.
   */
  timeout: number | 'none';
  /** A label shown in `context.jobs()` and the process title; not unique. At most 200 characters. */
  name?: string;
  /** Keep a finished job (state, result, output) this many ms after it ended, then remove it. Default 7 days. */
  keep?: number;
  /** Between SIGTERM and SIGKILL of the job's process group, at the timeout or on cancel, in ms. Default 5000. */
  grace?: number;
  /** Bytes of each output stream kept on the target (the last ones, past it), from 1 KiB to 32 MiB. Default 8 MiB. */
  maxOutput?: number;
  /** Working directory of the job. Default: the context's. */
  cwd?: string;
  /** Variables added to the context's environment for the job. */
  env?: Record<string, string>;
  /**
   * Ends the wait for the start with the signal's reason: the context is
   * told, and a job it has not started yet never runs (one already
   * running goes on: `context.jobs()` lists it). For a time limit on the
   * start, `AbortSignal.timeout(ms)`. Default: wait until it runs or fails
   * (the context gives a supervisor 120 s to start it).
   */
  signal?: AbortSignal;
}

/** Options of `context.startJob()`. */
export interface FunctionJobOptions extends JobOptions {
  /**
   * Modules the function loads with a computed `require()` or `import()`:
   * nobody serves modules to a job once it has detached, so anything
   * beyond its literal `require('x')` and `import('x')` (fetched with their
   * static closures) must be named here, as the function would write them.
   */
  preload?: string[];
  /** Where the function's `require()` and `import()` resolve from, as `CallOptions.base`. */
  base?: string | URL;
}

/** Options of `context.execJob()`. */
export interface CommandJobOptions extends JobOptions {
  /** Run `file` and `args`, joined by spaces, in a shell: `true` for /bin/sh, or a shell's path. Default false. */
  shell?: boolean | string;
}

const DAY = 24 * 3600_000;
const JOB_OPTIONS = ['timeout', 'name', 'keep', 'grace', 'maxOutput', 'cwd', 'env', 'signal'];
const FUNCTION_OPTIONS = new Set([...JOB_OPTIONS, 'preload', 'base']);
const COMMAND_OPTIONS = new Set([...JOB_OPTIONS, 'shell']);
/** Most output kept per stream: both streams' tails fit in one result under the default maxMessageSize (128 MiB). */
const MAX_OUTPUT = 32 * 1024 * 1024;
/** Longest kept retention: ten years, in ms. */
const MAX_KEEP = 3650 * DAY;

// biome-ignore lint/suspicious/noExplicitAny: parameter types are inferred from the caller's function.
type AnyFunction = (...args: any[]) => unknown;

/** `context.startJob()`: see `Context.startJob`. */
export function startJob<F extends AnyFunction>(
  context: Context,
  options: FunctionJobOptions,
  fn: F,
  args: unknown[],
): Promise<Job<Awaited<ReturnType<F>>>> {
  const where = 'context.startJob()';
  let spec: JobSpec;
  try {
    const given = optionsObject(options, where, FUNCTION_OPTIONS);
    const preload = given.preload;
    if (
      preload !== undefined &&
      (!Array.isArray(preload) || preload.some((spec) => typeof spec !== 'string' || !spec))
    ) {
      throw new InvalidOptionError('preload', where, 'an array of module specifiers', preload);
    }
    const references: object[] = [];
    const call = prepareJobCall(context, fn, args, location(given.base, 'base', where), references);
    if (references.length > 0) {
      throw new TypeError(
        `${where}: a job's arguments cannot hold Senders or Channels: the job outlives the connection they live on`,
      );
    }
    spec = { ...common(given, where), kind: 'function', call, ...(preload && { preload: [...preload] }) };
  } catch (error) {
    return Promise.reject(error);
  }
  return start<Awaited<ReturnType<F>>>(context, spec, options.signal);
}

/** `context.execJob()`: see `Context.execJob`. */
export function execJob(
  context: Context,
  file: string,
  args: readonly string[],
  options: CommandJobOptions,
): Promise<Job<CommandJobResult>> {
  const where = 'context.execJob()';
  let spec: JobSpec;
  try {
    checkArgv(file, args, where);
    const given = optionsObject(options, where, COMMAND_OPTIONS);
    const shell = given.shell;
    if (shell !== undefined && typeof shell !== 'boolean') text(shell, 'shell', where, undefined, MAX_PATH);
    spec = { ...common(given, where), kind: 'command', command: { file, args: [...args], shell: shell ?? false } };
  } catch (error) {
    return Promise.reject(error);
  }
  return start<CommandJobResult>(context, spec, options.signal);
}

/** The options every job takes, checked. */
function common(given: JobOptions, where: string): Omit<JobSpec, 'kind'> {
  const timeout = given.timeout === 'none' ? null : milliseconds(given.timeout, 'timeout', where, undefined, 1);
  if (timeout === undefined) {
    throw new InvalidOptionError(
      'timeout',
      where,
      `given: a number of ms from 1 to ${MAX_TIMER}, or 'none' for a job that may run for ever`,
      undefined,
    );
  }
  abortSignal(given.signal, 'signal', where);
  const name = text(given.name, 'name', where, undefined, 200);
  if (name !== undefined && [...name].some((char) => char.charCodeAt(0) < 0x20)) {
    throw new InvalidOptionError('name', where, 'text without control characters', name);
  }
  return {
    name: name ?? null,
    timeout,
    keep: integer(given.keep, 'keep', where, 7 * DAY, 0, MAX_KEEP),
    grace: milliseconds(given.grace, 'grace', where, 5000),
    maxOutput: integer(given.maxOutput, 'maxOutput', where, 8 * 1024 * 1024, 1024, MAX_OUTPUT),
    cwd: text(given.cwd, 'cwd', where, undefined, MAX_PATH) ?? null,
    env: environment(given.env, where) ?? null,
  };
}

async function start<T>(context: Context, spec: JobSpec, signal: AbortSignal | undefined): Promise<Job<T>> {
  let reply: unknown;
  try {
    // The signal reaches the context as the call's (jobStart stops there, and abandons a job not yet running).
    reply = await context[CALL_TOOLKIT](
      'jobStart',
      [spec],
      signal ? { signal } : {},
      `start of job ${spec.name ?? ''}`.trim(),
    );
  } catch (error) {
    throw jobErrorOf(error, '(not started)', context.name);
  }
  const status = parseJobStatus(reply);
  if (typeof status === 'string') {
    throw new TypeError(`context '${context.name}' answered a job's start with ${status}`);
  }
  return new Job<T>(context, status.id);
}

/**
 * `context.job(id)`: a handle on a job of this account on the context's target.
 * @throws InvalidOptionError when `id` is not a job ID's shape (nothing is sent).
 */
export function jobOf(context: Context, id: string): Job {
  if (typeof id !== 'string' || !JOB_ID.test(id)) {
    throw new InvalidOptionError('id', 'context.job()', 'a job ID (24 hex digits, as startJob gave)', id);
  }
  return new Job(context, id);
}

/** `context.jobs()`: every job of this account on the context's target, oldest first. */
export async function jobsOf(
  context: Context,
  options: OperationOptions,
): Promise<import('./protocol.js').JobStatus[]> {
  const { timeout, signal } = checkOperationOptions(options, 'context.jobs()');
  let list: unknown;
  try {
    list = await context[CALL_TOOLKIT]('jobList', [], { timeout, signal }, 'list of jobs');
  } catch (error) {
    throw jobErrorOf(error, '(all)', context.name);
  }
  if (!Array.isArray(list) || list.length > 100_000) {
    throw new TypeError(`context '${context.name}' answered a list of jobs with something else`);
  }
  const statuses = [];
  for (const item of list) {
    const status = parseJobStatus(item);
    if (typeof status === 'string') throw new TypeError(`context '${context.name}' listed a job with ${status}`);
    statuses.push(status);
  }
  return statuses;
}
