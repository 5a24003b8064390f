// Another process of the account puts a FIFO where tendril reads one of
// the account's own files: an ssh config (or a file it includes), a
// known_hosts file, an identity file. open(2) of a FIFO blocks until a
// writer comes, and these reads are synchronous: the whole process (the
// master, or an intermediate that starts ssh children) would stop for
// good. Each read runs in a process of its own here, so a hang is seen
// as one (and killed) instead of stalling the test.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { type FSWatcher, mkdirSync, mkdtempSync, rmSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { Router } from 'tendril';
import { ROOT } from './support/procs.js';

/** Far longer than a refusal takes: a process still running then is blocked in open(2). */
const HANG = 10_000;

const internal = pathToFileURL(join(ROOT, 'dist', 'internal.js')).href;
const tendril = pathToFileURL(join(ROOT, 'dist', 'index.js')).href;

/**
 * Runs `body` (an async function's body, with `internal` and `tendril`
 * the package's modules) in a Node process of its own; returns what it
 * printed, or fails when it is still running after HANG ms.
 */
function isolated(body: string): string {
  const script = `const internal = await import(${JSON.stringify(internal)});
const tendril = await import(${JSON.stringify(tendril)});
try { console.log(String(await (async () => { ${body} })())); }
catch (error) { console.log(\`threw \${error?.name}: \${error?.message}\`); }
process.exit(0);`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: HANG,
    killSignal: 'SIGKILL',
  });
  assert.notEqual(run.signal, 'SIGKILL', `still blocked after ${HANG} ms (killed): it waited on the FIFO`);
  assert.equal(run.status, 0, run.stderr);
  return run.stdout.trim();
}

describe('a FIFO where one of the account’s own files should be is refused, never waited on', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'tendril-fifo-paths-'));
  after(() => rmSync(scratch, { recursive: true, force: true }));
  const fifo = (name: string): string => {
    const path = join(scratch, name);
    execFileSync('mkfifo', ['-m', '600', path]);
    return path;
  };

  test('an ssh config, and a file an Include brings in', () => {
    const home = join(scratch, 'home');
    mkdirSync(join(home, '.ssh'), { recursive: true, mode: 0o700 });
    execFileSync('mkfifo', ['-m', '600', join(home, '.ssh', 'config')]);
    const direct = isolated(`return internal.resolveHost('web1', { home: ${JSON.stringify(home)} }).hostname;`);
    assert.match(direct, /^threw Error: cannot read the ssh config .*config: .* is a FIFO, not a regular file/);
    const config = join(scratch, 'includes');
    writeFileSync(config, `Include ${join(scratch, 'included*')}\n`, { mode: 0o600 });
    fifo('included.conf');
    const included = isolated(
      `return internal.resolveHost('web1', { home: ${JSON.stringify(home)}, configFile: ${JSON.stringify(config)} }).hostname;`,
    );
    assert.match(included, /^threw Error: cannot read the ssh config .*included\.conf: .*FIFO/);
    // `ssh -F /dev/null` still means no config.
    assert.equal(
      isolated(
        `return internal.resolveHost('web1', { home: ${JSON.stringify(home)}, configFile: '/dev/null' }).hostname;`,
      ),
      'web1',
    );
  });

  test('a known_hosts file, read and recorded to', () => {
    const path = fifo('known_hosts');
    assert.match(isolated(`return internal.readKnownHosts(${JSON.stringify(path)}).length;`), /^threw .*FIFO/);
    assert.match(
      isolated(`return internal.recordHostKey(${JSON.stringify(path)}, 'web1', Buffer.from('00000007', 'hex'));`),
      // With no reader, open(2) for writing without blocking fails at once (ENXIO); with one, fstat refuses it.
      /^threw .*(FIFO|ENXIO)/,
    );
    // UserKnownHostsFile /dev/null: nothing known, nothing kept.
    assert.equal(isolated(`return internal.readKnownHosts('/dev/null').length;`), '0');
    assert.equal(
      isolated(`return internal.recordHostKey('/dev/null', 'web1', Buffer.from('00', 'hex'));`),
      'undefined',
    );
  });

  test('an identity file: the ssh method fails naming it, before it connects', () => {
    const key = fifo('id_ed25519');
    const outcome = isolated(`const router = new tendril.Router();
      try {
        await router.ssh({ hostname: '127.0.0.1', port: 9, identityFile: ${JSON.stringify(key)}, connectTimeout: 2000 });
        return 'connected';
      } finally {
        await router.shutdown();
      }`);
    assert.match(outcome, /^threw BootstrapError: .*cannot read identity file .*id_ed25519: .*FIFO/);
  });
});

describe('a file of a tree replaced by a FIFO while the tree is sent', () => {
  test('the transfer fails naming it, instead of waiting on the FIFO for ever', async () => {
    const scratch = mkdtempSync(join(tmpdir(), 'tendril-fifo-tree-'));
    const router = new Router();
    let watcher: FSWatcher | undefined;
    try {
      const context = await router.local({ name: 'tree-sender' });
      const tree = join(scratch, 'tree');
      mkdirSync(tree);
      // The first file is large enough to be in flight when the second is swapped.
      writeFileSync(join(tree, 'a-large'), Buffer.alloc(64 * 1024 * 1024, 1));
      writeFileSync(join(tree, 'z-small'), 'small');
      let swapped = false;
      // Another process of the account, once the walk is done (the receiving side begins writing):
      // the file becomes a FIFO nobody writes.
      watcher = watch(scratch, (_event, name) => {
        if (swapped || name === 'tree') return;
        swapped = true;
        rmSync(join(tree, 'z-small'));
        execFileSync('mkfifo', ['-m', '600', join(tree, 'z-small')]);
      });
      await assert.rejects(
        context.fetch(tree, join(scratch, 'fetched'), { recursive: true, timeout: HANG }),
        (error: Error) =>
          (error as { code?: string }).code === 'ERR_TENDRIL_NOT_A_FILE' &&
          /something else was put at its path .*z-small/.test(error.message),
      );
      assert.ok(swapped, 'the file was swapped while the tree was sent');
    } finally {
      watcher?.close();
      await router.shutdown();
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
