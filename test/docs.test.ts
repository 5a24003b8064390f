// The README and docs/*.md as a contract: every code block is run as
// written, so no example can rot.
//
// - A ```js / ```mjs block is an ES module, ```cjs a CommonJS script, ```ts
//   TypeScript (run with tsx, and type-checked with skipLibCheck off). Each
//   runs as its own program, in a scratch folder per document, and must
//   exit 0 by itself.
// - A block whose first line is `// file: <name>` is a file the others use
//   (tasks.js, settings.json, say): it is written into the scratch folder,
//   without that line, and not run.
// - SSH examples reach the suite's own sshd: HOME is a scratch home whose
//   ~/.ssh/config maps the hosts `web1` and `web2` to it, logging in as an
//   account that may sudo with the password in $SUDO_PASSWORD.
// - ```sh blocks: the README's two commands are the demo (run here from
//   its build) and the test command (which is this run); any other shell
//   block runs with sh.
// - Container examples reach a Podman store of this file's own, through
//   CONTAINERS_STORAGE_CONF and CONTAINERS_CONF, with a container `web`
//   running the test image (test/support/containers.ts).
// - The master's store of Node runtimes and npm's cache are kept in
//   .cache/docs and .cache/npm between runs (docs/runtime.md's examples).
// - ```text blocks are diagrams and output, not code. A block in any other
//   language fails the test: it could not be checked.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { marked, type Tokens } from 'marked';
import { PodmanBed } from './support/containers.js';
import { ROOT } from './support/procs.js';
import { sshHome, startTestbed, type Testbed } from './support/testbed.js';
import { typeCheck } from './support/typecheck.js';

interface Block {
  lang: string;
  text: string;
  /** 1-based line of the opening fence. */
  line: number;
}

const DOCUMENTS = ['README.md', ...readdirSync(join(ROOT, 'docs')).map((name) => join('docs', name))].filter((name) =>
  name.endsWith('.md'),
);
const RUNNABLE = new Set(['js', 'mjs', 'cjs', 'ts', 'sh']);
const SCRATCH = join(ROOT, 'build', 'docs');

function blocksOf(document: string): Block[] {
  const markdown = readFileSync(join(ROOT, document), 'utf8');
  const blocks: Block[] = [];
  let searchFrom = 0;
  marked.walkTokens(marked.lexer(markdown), (token) => {
    if (token.type !== 'code') return;
    const code = token as Tokens.Code;
    const at = markdown.indexOf(code.raw.trimStart(), searchFrom);
    searchFrom = at + 1;
    blocks.push({ lang: code.lang ?? '', text: code.text, line: markdown.slice(0, at).split('\n').length });
  });
  return blocks;
}

function fileName(block: Block): string | undefined {
  return /^\/\/ file: (\S+)\n/.exec(block.text)?.[1];
}

describe('README and docs examples run as written', () => {
  let bed: Testbed;
  let env: NodeJS.ProcessEnv;

  let containers: PodmanBed | undefined;

  before(async () => {
    bed = await startTestbed();
    rmSync(SCRATCH, { recursive: true, force: true });
    env = sshHome(bed, join(SCRATCH, 'home'));
    // The master's store of Node runtimes (docs/runtime.md) and npm's cache outlive the scratch home:
    // the examples that ship Node fetch its ~50 MB package once, not on every run.
    env.XDG_CACHE_HOME = join(ROOT, '.cache', 'docs');
    env.npm_config_cache = join(ROOT, '.cache', 'npm');
    // Container examples use plain `podman`: its configuration files point it at this file's own store,
    // where a container `web` of the test image (Node, sudo, an account `app`) runs.
    containers = PodmanBed.start();
    containers.run('web');
    Object.assign(env, podmanConfiguration(containers));
  });
  after(async () => {
    containers?.stop();
    await bed.stop();
  });

  test('every code block is in a language this test runs', () => {
    const unknown = DOCUMENTS.flatMap((document) =>
      blocksOf(document)
        .filter((block) => !RUNNABLE.has(block.lang) && block.lang !== 'text' && !fileName(block))
        .map((block) => `${document}:${block.line} (${block.lang || 'no language'})`),
    );
    assert.deepEqual(unknown, [], 'blocks that cannot be checked: give them a language (js, ts, sh) or mark them text');
  });

  for (const document of DOCUMENTS) {
    const blocks = blocksOf(document).filter((block) => RUNNABLE.has(block.lang) || fileName(block));
    if (blocks.length === 0) continue;
    test(`${document}: ${blocks.length} blocks`, async () => {
      const dir = join(SCRATCH, document.replace(/[/.]/g, '_'));
      mkdirSync(dir, { recursive: true });
      for (const block of blocks) {
        const name = fileName(block);
        if (!name) continue;
        mkdirSync(dirname(join(dir, name)), { recursive: true });
        writeFileSync(join(dir, name), block.text.slice(block.text.indexOf('\n') + 1));
      }
      const typescript: string[] = [];
      for (const block of blocks) {
        if (fileName(block)) {
          if (block.lang === 'ts') typescript.push(fileName(block) as string);
          continue;
        }
        const where = `${document}:${block.line}`;
        if (block.lang === 'sh') {
          await runShell(block, dir, where);
          continue;
        }
        const file = `block-${block.line}.${block.lang === 'js' ? 'mjs' : block.lang}`;
        writeFileSync(join(dir, file), block.text);
        if (block.lang === 'ts') typescript.push(file);
        const args = block.lang === 'ts' ? ['--import', 'tsx', file] : [file];
        await run(process.execPath, args, dir, env, where);
      }
      const failure =
        typescript.length > 0 ? typeCheck(dir, typescript, { allowImportingTsExtensions: true }) : undefined;
      assert.equal(failure, undefined, `${document}: the TypeScript examples do not type-check:\n${failure}`);
    });
  }

  async function runShell(block: Block, dir: string, where: string): Promise<void> {
    const command = block.text.trim();
    if (command === 'npm install && npm test') return; // This very run.
    if (command === 'npm install && npm run demo') {
      const output = await run(process.execPath, [join(ROOT, 'build', 'examples', 'demo.js')], ROOT, env, where);
      assert.match(output, /median round trip of an empty call: \d+ µs/, `${where}: the demo's output:\n${output}`);
      return;
    }
    await run('sh', ['-e', '-c', command], dir, env, where);
  }
});

/** Runs a program to its end; its output, or an error quoting it. */
async function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, where: string) {
  try {
    const { stdout, stderr } = await promisify(execFile)(command, args, { cwd, env, timeout: 60_000 });
    return stdout + stderr;
  } catch (error) {
    const { stdout, stderr, message } = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`the example at ${where} failed: ${message}\n${stdout ?? ''}${stderr ?? ''}`);
  }
}

/** The environment that makes a plain `podman` use `bed`'s store and settings, as its `args` do. */
function podmanConfiguration(bed: PodmanBed): NodeJS.ProcessEnv {
  const storage = join(bed.dir, 'storage.conf');
  writeFileSync(
    storage,
    `[storage]\ndriver = "overlay"\ngraphroot = "${join(bed.dir, 'root')}"\nrunroot = "${join(bed.dir, 'run')}"\n`,
  );
  const containers = join(bed.dir, 'containers.conf');
  writeFileSync(
    containers,
    [
      '[containers]',
      'default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]',
      '[engine]',
      'runtime = "runc"',
      'cgroup_manager = "cgroupfs"',
      'events_logger = "file"',
      '',
    ].join('\n'),
  );
  return { CONTAINERS_STORAGE_CONF: storage, CONTAINERS_CONF: containers };
}
