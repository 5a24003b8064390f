import * as fs from 'node:fs';
import { join } from 'node:path';
import { decode } from './codec.js';
import { ModuleRequestError } from './errors.js';
import { Importer, type ModuleSnapshot, TOOLKIT_MODULE_ID } from './importer.js';
import { openRegularFile, readRange } from './regular-file.js';
import { MessageSwitch } from './switch.js';
import { closed, ownedAlone } from './target-code-cache.js';

/** What the core reads of a job's request file; the rest is the toolkit's (src/toolkit/jobs). */
interface JobModules {
  /** The modules the job loads, taken from the context that started it. */
  modules: ModuleSnapshot;
  /** The file tendril's toolkit was resolved from in that context. */
  toolkitFrom: string;
}

/** The part of the toolkit a job's processes run (src/toolkit/jobs/process.ts). */
interface JobToolkit {
  runJobProcess(role: string, directory: string, process: JobProcess): void;
}

/** What a job's process is given besides its directory. */
export interface JobProcess {
  /** The core's namespace. */
  core: object;
  /** The core's source, as this process read it: the supervisor hands it to the worker. */
  coreSource: Uint8Array;
  /** Loads the job's modules, all of them already here. */
  importer: Importer;
  /** This process's `require`: built-ins, and packages installed on the target. */
  nativeRequire: NodeJS.Require;
  /** The job's request file, decoded. */
  request: unknown;
}

/**
 * Starts one of a job's two processes (the supervisor, or the worker that
 * runs the function): called by the job stage, which read the core from
 * fd 3, with `process.argv` `[node, 'tendril-job', role, directory]`. No
 * parent serves modules here: everything the job loads was taken from
 * the context before it detached (the request file's `modules`), and a
 * module outside it fails with an error that says to preload it.
 */
export function bootJob(coreSource: Uint8Array, nativeRequire: NodeJS.Require, core: object): void {
  const [role, directory] = process.argv.slice(2) as [string, string];
  const uid = process.geteuid?.() ?? 0;
  // The job's directory and request must be this account's alone, as the context made them.
  if (!closed(fs.lstatSync(directory), uid)) throw new Error(`${directory} is not a directory of this account's alone`);
  // A regular file, not a link, opened without blocking (a FIFO there is refused, not waited on).
  const { fd, stats } = openRegularFile(join(directory, 'request'));
  let data: Buffer;
  try {
    if (!ownedAlone(stats, uid)) throw new Error(`${directory}/request is not this account's alone`);
    data = readRange(fd, 0, stats.size);
  } finally {
    fs.closeSync(fd);
  }
  const request = decode(data) as JobModules;
  const router = new MessageSwitch({ id: 1, name: 'job', parentIds: [] });
  const importer = new Importer(router, core, nativeRequire, {
    preferTargetModules: false,
    requestSync: () => {
      throw new Error('internal: a job has no parent to ask');
    },
    offline: (specs, from) =>
      new ModuleRequestError(
        `a job cannot load ${specs.map((spec) => `'${spec}'`).join(', ')} (from ${from}): it has no connection to fetch modules over, and was given only what its function requires or imports literally; name ${specs.length > 1 ? 'them' : 'it'} in the preload option of startJob()`,
      ),
  });
  importer.restore(request.modules);
  // As the context loaded it (CALL_TOOLKIT imports it), so the resolution the job carries is that one.
  void importer
    .import(request.toolkitFrom, TOOLKIT_MODULE_ID)
    .then((toolkit) =>
      (toolkit as JobToolkit).runJobProcess(role, directory, { core, coreSource, importer, nativeRequire, request }),
    );
}
