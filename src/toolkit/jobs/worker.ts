/**
 * A job's worker: the process that runs a function job's function, started
 * by the supervisor in a session and process group of its own. Everything
 * the function loads is already here (the request's modules); its result,
 * or what it threw, is written to the job's `result` file: one byte (1
 * when it returned, 0 when it threw) and the value encoded as a call's
 * reply would carry it. It exits once the function has settled.
 */
import * as fs from 'node:fs';
import { callOrigin } from '../../core/call-base.js';
import { encode } from '../../core/codec.js';
import { toRemoteErrorInfo } from '../../core/errors.js';
import { compileFunction } from '../../core/function-source.js';
import type { Importer } from '../../core/importer.js';
import { callLocation } from '../../core/protocol/call-function.js';
import type { JobRequest } from './request.js';
import { STARTED } from './request.js';
import { RESULT_FILE, writeAtomically } from './state.js';

/** Runs the function of the job in `directory`. */
export function work(directory: string, request: JobRequest, importer: Importer): void {
  const call = request.spec.call;
  if (!call) throw new Error(`the job in ${directory} has no function`);
  const from = call.b ?? callOrigin(request.moduleBase);
  const settle = (ok: boolean, value: unknown) => {
    let data: Uint8Array;
    try {
      data = encode(value);
    } catch (error) {
      [ok, data] = [false, encode(toRemoteErrorInfo(error))];
    }
    writeAtomically(directory, RESULT_FILE, Buffer.concat([Buffer.from([ok ? 1 : 0]), data]));
    process.exit(0);
  };
  try {
    process.title = `tendril-job ${request.spec.name ?? request.id}`;
  } catch {
    // Cosmetic.
  }
  fs.writeSync(4, STARTED);
  fs.closeSync(4);
  let result: unknown;
  try {
    const location = call.l === undefined ? undefined : callLocation(call.l, 'call.l');
    result = compileFunction(String(call.f), location)(importer.requireFrom(from), importer.importFrom(from)).apply(
      undefined,
      call.a ?? [],
    );
  } catch (error) {
    settle(false, toRemoteErrorInfo(error));
    return;
  }
  Promise.resolve(result).then(
    (value) => settle(true, value),
    (error: unknown) => settle(false, toRemoteErrorInfo(error)),
  );
}
