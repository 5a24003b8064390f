// The heartbeat over the hops a frozen process hides behind: a sudo
// context, a paused container, and the ssh client of an openssh hop.
// Each: pending calls to the hop and to a context behind it (no timeout
// of their own) reject within heartbeatTimeout + 5 s with
// ContextDisconnectedError naming the silent hop; nothing is left running
// once the process is continued; the master starts a new context at once.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { type Context, ContextDisconnectedError, Router } from 'tendril';
import { assertNoContextLeft, PodmanBed } from './support/containers.js';
import { isAlive, waitGone } from './support/procs.js';
import { startTestbed, type Testbed } from './support/testbed.js';

const HEARTBEAT = { heartbeatInterval: 250, heartbeatTimeout: 1500, shutdownGrace: 300 } as const;
const pidOf = (context: Context) => context.call(() => process.pid);

/**
 * Calls to `mid` and `leaf` made while `freeze` holds `mid` (until `thaw`):
 * both reject as the heartbeat says, in time, and a new context starts at once.
 */
async function frozenHop(router: Router, mid: Context, leaf: Context, freeze: () => void, thaw: () => void) {
  assert.equal(await leaf.call(() => 2), 2);
  freeze();
  try {
    const start = Date.now();
    const settled = await Promise.all(
      [mid, leaf].map((context) =>
        context
          .call(() => 1)
          .then(
            () => assert.fail(`the call to ${context.name} answered`),
            (error: Error) => ({ error, ms: Date.now() - start, name: context.name }),
          ),
      ),
    );
    for (const { error, ms, name } of settled) {
      assert.ok(error instanceof ContextDisconnectedError, `${name}: ${error}`);
      assert.equal(error.kind, 'heartbeat');
      assert.ok(
        error.message.includes(`no answer for 1.5 s (stream to ${mid.name})`),
        `${name}: the silent hop is named: ${error.message}`,
      );
      assert.ok(ms >= 1400 && ms < 1500 + 5000, `${name} rejected after ${ms} ms`);
    }
    const fresh = await router.local({ name: 'after-the-freeze' });
    assert.equal(await fresh.call(() => 3), 3);
    await fresh.shutdown();
  } finally {
    thaw();
  }
}

/** The master's own child processes named `comm`. */
function childrenNamed(comm: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (name === comm && ppid === process.pid) pids.push(Number(entry));
    } catch {
      // Gone while read.
    }
  }
  return pids;
}

describe('heartbeat through hops', () => {
  let bed: Testbed;
  before(async () => {
    bed = await startTestbed();
  });
  after(async () => {
    await bed.stop();
  });

  test('sudo: kill -STOP of the context behind sudo', async () => {
    await using router = new Router(HEARTBEAT);
    const mid = await router.sudo({ name: 'sudo-mid', username: bed.accounts.target.name });
    const leaf = await router.local({ name: 'sudo-leaf', via: mid });
    const [midPid, leafPid] = [await pidOf(mid), await pidOf(leaf)];
    await frozenHop(
      router,
      mid,
      leaf,
      () => process.kill(midPid, 'SIGSTOP'),
      () => isAlive(midPid) && process.kill(midPid, 'SIGCONT'),
    );
    await waitGone([midPid, leafPid], 5000);
  });

  test('openssh: kill -STOP of the ssh client', async () => {
    await using router = new Router(HEARTBEAT);
    const before = new Set(childrenNamed('ssh'));
    const mid = await router.openssh({
      name: 'openssh-mid',
      hostname: '127.0.0.1',
      port: bed.port,
      username: bed.accounts.key.name,
      identityFile: bed.keyFile,
      knownHostsFile: bed.knownHosts,
    });
    const leaf = await router.local({ name: 'openssh-leaf', via: mid });
    const ssh = childrenNamed('ssh').filter((pid) => !before.has(pid));
    assert.equal(ssh.length, 1, 'one ssh client for the hop');
    const [midPid, leafPid] = [await pidOf(mid), await pidOf(leaf)];
    const sshPid = ssh[0] as number;
    await frozenHop(
      router,
      mid,
      leaf,
      () => process.kill(sshPid, 'SIGSTOP'),
      () => isAlive(sshPid) && process.kill(sshPid, 'SIGCONT'),
    );
    // The client is killed; sshd closes the session, and the contexts behind it leave.
    await waitGone([sshPid, midPid, leafPid], 10_000);
  });

  describe('podman', () => {
    let podman: PodmanBed;
    before(() => {
      podman = PodmanBed.start();
      podman.run('frozen');
    });
    after(() => {
      podman?.stop();
    });

    test('podman pause: the container of mid is frozen, its leaf with it', async () => {
      await using router = new Router(HEARTBEAT);
      const mid = await router.podman({ name: 'podman-mid', container: 'frozen', podmanArgs: podman.args });
      const leaf = await router.local({ name: 'podman-leaf', via: mid });
      await frozenHop(
        router,
        mid,
        leaf,
        () => podman.podman(['pause', 'frozen']),
        () => podman.podman(['unpause', 'frozen']),
      );
      // Unpaused: mid finds its stream gone, leaf its parent; neither is left.
      const exec = (argv: string[]) => podman.podman(['exec', 'frozen', ...argv]);
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline) {
        try {
          assertNoContextLeft(exec);
          break;
        } catch (error) {
          if (Date.now() + 200 > deadline) throw error;
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }
    });
  });
});
