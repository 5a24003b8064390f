import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  AuthenticationError,
  ContextDisconnectedError,
  ContextPool,
  describeTarget,
  InvalidOptionError,
  PoolError,
  type PoolTarget,
  Router,
  TimeoutError,
} from 'tendril';
import { waitFor } from './support/procs.js';
import { sshLogin, startTestbed, type Testbed } from './support/testbed.js';

const whoami = () => (require('node:os') as typeof import('node:os')).userInfo().username;

/** A local target named `name`. */
const local = (name: string): PoolTarget => ({ method: 'local', name });

/** Contexts of `router` that have gone away, by ID. */
function departures(router: Router): Set<number> {
  const gone = new Set<number>();
  router.on('disconnect', (id) => gone.add(id));
  return gone;
}

/** A TCP relay to the test bed's sshd that counts the connections made through it: one per SSH connection. */
async function countingRelay(port: number): Promise<{ port: number; connections(): number; close(): Promise<void> }> {
  let count = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    count++;
    const upstream = connect(port, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  assert.ok(address && typeof address === 'object');
  return {
    port: address.port,
    connections: () => count,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('pool: local contexts', { timeout: 120_000 }, () => {
  let router: Router;
  let gone: Set<number>;

  before(() => {
    router = new Router();
    gone = departures(router);
  });
  after(() => router.shutdown());

  test('the same target twice is one context; another name is another', async () => {
    const pool = new ContextPool(router);
    const a = await pool.acquire(local('same'));
    const b = await pool.acquire({ name: 'same', method: 'local' });
    const c = await pool.acquire(local('other'));
    assert.equal(a.context, b.context);
    assert.equal(a.key, b.key);
    assert.notEqual(c.context.id, a.context.id);
    assert.notEqual(c.key, a.key);
    assert.equal(a.context.name, 'same');
    assert.deepEqual(pool.stats(), { contexts: 2, idle: 0, connecting: 0, waiting: 0, hits: 1, misses: 2 });
    a.release();
    a.release(); // idempotent: one lease, one release
    assert.equal(pool.stats().idle, 0, 'still held by b');
    b.release();
    c.release();
    assert.deepEqual(pool.stats(), { contexts: 2, idle: 2, connecting: 0, waiting: 0, hits: 1, misses: 2 });
    // Idle contexts stay open and are handed out again.
    const again = await pool.acquire(local('same'));
    assert.equal(again.context, a.context);
    assert.equal(await again.context.call(() => 6 * 7), 42);
    again.release();
    const ids = [a.context.id, c.context.id];
    await pool.close();
    assert.ok(
      ids.every((id) => gone.has(id)),
      'close() shut down the idle contexts',
    );
  });

  test('concurrent acquires of one target share one start', async () => {
    const pool = new ContextPool(router);
    let routes = 0;
    const onRoute = () => routes++;
    router.on('route', onRoute);
    try {
      const leases = await Promise.all(Array.from({ length: 8 }, () => pool.acquire(local('shared'))));
      assert.equal(new Set(leases.map((lease) => lease.context)).size, 1);
      assert.equal(routes, 1, 'one context started');
      assert.equal(pool.stats().misses, 1);
      assert.equal(pool.stats().hits, 7);
      for (const lease of leases) lease.release();
      assert.equal(pool.stats().idle, 1);
    } finally {
      router.off('route', onRoute);
      await pool.close();
    }
  });

  test('pool.use() acquires, runs and releases, also when the function throws', async () => {
    const pool = new ContextPool(router);
    assert.equal(await pool.use(local('use'), (context) => context.call(() => 'ran')), 'ran');
    await assert.rejects(
      pool.use(local('use'), () => {
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.deepEqual(pool.stats(), { contexts: 1, idle: 1, connecting: 0, waiting: 0, hits: 1, misses: 1 });
    await pool.close();
  });

  test('unique: a context of its own, closed when released', async () => {
    const pool = new ContextPool(router);
    const shared = await pool.acquire(local('u'));
    const first = await pool.acquire(local('u'), { unique: true });
    const second = await pool.acquire(local('u'), { unique: true });
    assert.equal(new Set([shared.context.id, first.context.id, second.context.id]).size, 3);
    first.release();
    await waitFor(() => gone.has(first.context.id));
    assert.ok(!gone.has(second.context.id));
    second.release();
    shared.release();
    await waitFor(() => gone.has(second.context.id));
    assert.ok(!gone.has(shared.context.id), 'the shared context stays, idle');
    assert.deepEqual(pool.stats(), { contexts: 1, idle: 1, connecting: 0, waiting: 0, hits: 0, misses: 3 });
    await pool.close();
  });

  test('past maxContexts, the least recently used idle context is closed first', async () => {
    const pool = new ContextPool(router, { maxContexts: 2 });
    const a = await pool.acquire(local('lru-a'));
    const b = await pool.acquire(local('lru-b'));
    a.release();
    b.release();
    // a is now the least recently used; using it again makes b so.
    (await pool.acquire(local('lru-a'))).release();
    const c = await pool.acquire(local('lru-c'));
    assert.ok(gone.has(b.context.id), 'b (least recently used) was closed before c started');
    assert.ok(!gone.has(a.context.id));
    assert.equal(await a.context.call(() => 'a lives'), 'a lives');
    await assert.rejects(
      b.context.call(() => 1),
      ContextDisconnectedError,
    );
    assert.equal(pool.stats().contexts, 2);
    // b again: a is the idle one now.
    const b2 = await pool.acquire(local('lru-b'));
    assert.ok(gone.has(a.context.id));
    assert.notEqual(b2.context.id, b.context.id);
    c.release();
    b2.release();
    await pool.close();
  });

  test('with every context in use, an acquire waits for a release, under its signal and timeout', async () => {
    const pool = new ContextPool(router, { maxContexts: 1 });
    const held = await pool.acquire(local('busy-a'));
    const controller = new AbortController();
    const aborted = pool.acquire(local('busy-b'), { signal: controller.signal });
    await waitFor(() => pool.stats().waiting === 1);
    controller.abort(new Error('not any more'));
    await assert.rejects(aborted, /not any more/);
    assert.equal(pool.stats().waiting, 0, 'the start nobody waits for is dropped');
    await assert.rejects(pool.acquire(local('busy-b'), { timeout: 50 }), (error: unknown) => {
      assert.ok(error instanceof TimeoutError);
      assert.match(error.message, /acquiring a context from the pool in context 'local name=busy-b'/);
      return true;
    });
    assert.equal(pool.stats().waiting, 0);
    // Nothing waits any more: released, busy-a stays, idle.
    held.release();
    assert.deepEqual(pool.stats(), { contexts: 1, idle: 1, connecting: 0, waiting: 0, hits: 0, misses: 3 });
    assert.ok(!gone.has(held.context.id));
    // Held again, then a waiting acquire gets its room when it is released.
    const again = await pool.acquire(local('busy-a'));
    const waiting = pool.acquire(local('busy-b'));
    await waitFor(() => pool.stats().waiting === 1);
    again.release();
    const b = await waiting;
    assert.ok(gone.has(held.context.id), 'busy-a was closed to make room');
    assert.equal(await b.context.call(() => 'b'), 'b');
    b.release();
    await pool.close();
  });

  test('an acquire that gives up does not stop the start others wait on', async () => {
    const pool = new ContextPool(router);
    const controller = new AbortController();
    const leaving = pool.acquire(local('stay'), { signal: controller.signal });
    const staying = pool.acquire(local('stay'));
    controller.abort();
    await assert.rejects(leaving, { name: 'AbortError' });
    const lease = await staying;
    assert.equal(await lease.context.call(() => 'started'), 'started');
    lease.release();
    // An already aborted signal: rejected at once, nothing started.
    await assert.rejects(pool.acquire(local('never'), { signal: AbortSignal.abort() }), { name: 'AbortError' });
    assert.equal(pool.stats().misses, 1);
    await pool.close();
  });

  test('maxConnecting bounds the starts in flight', async () => {
    const pool = new ContextPool(router, { maxConnecting: 2 });
    let most = 0;
    let queued = 0;
    let sampling = true;
    const sample = () => {
      const stats = pool.stats();
      most = Math.max(most, stats.connecting);
      queued = Math.max(queued, stats.waiting);
      if (sampling) setImmediate(sample);
    };
    sample();
    const leases = await Promise.all(Array.from({ length: 6 }, (_, i) => pool.acquire(local(`mc-${i}`))));
    sampling = false;
    assert.equal(most, 2, 'two starts at once, never more');
    assert.ok(queued >= 3, `the others queued (at most ${queued} seen waiting)`);
    assert.equal(new Set(leases.map((lease) => lease.context.id)).size, 6);
    for (const lease of leases) lease.release();
    await pool.close();
  });

  test('a context that dies leaves the pool; the next acquire starts another', async () => {
    const pool = new ContextPool(router);
    const lease = await pool.acquire(local('mortal'));
    process.kill(lease.context.info.pid, 'SIGKILL');
    await waitFor(() => gone.has(lease.context.id));
    assert.equal(pool.stats().contexts, 0);
    await assert.rejects(
      lease.context.call(() => 1),
      ContextDisconnectedError,
    );
    const next = await pool.acquire(local('mortal'));
    assert.notEqual(next.context.id, lease.context.id);
    lease.release(); // released after its death: harmless
    assert.equal(pool.stats().idle, 0, 'the old lease does not touch the new context');
    next.release();
    await pool.close();
  });

  test('idleTimeout closes contexts left idle', async () => {
    const pool = new ContextPool(router, { idleTimeout: 20 });
    const lease = await pool.acquire(local('idle'));
    lease.release();
    await waitFor(() => gone.has(lease.context.id));
    assert.equal(pool.stats().contexts, 0);
    await pool.close();
  });

  test('a via Context: the pooled context is started under it, keyed by its ID, and it is left open', async () => {
    const pool = new ContextPool(router);
    const parent = await router.local({ name: 'via-parent' });
    const lease = await pool.acquire({ method: 'local', via: parent });
    assert.equal(lease.context.parentId, parent.id);
    assert.match(lease.label, /^local via context 'via-parent' \(id \d+\)$/);
    const direct = await pool.acquire({ method: 'local' });
    assert.notEqual(direct.context.id, lease.context.id);
    lease.release();
    direct.release();
    await pool.close();
    assert.ok(gone.has(lease.context.id));
    assert.ok(!gone.has(parent.id), 'the via the program holds is not the pool’s to close');
    await parent.shutdown();
  });

  test('close() rejects pending acquires, shuts down held and idle contexts, and refuses new ones', async () => {
    const pool = new ContextPool(router, { maxContexts: 1 });
    const held = await pool.acquire(local('close-held'));
    const pending = pool.acquire(local('close-pending'));
    await waitFor(() => pool.stats().waiting === 1);
    const closed = pool.close();
    await assert.rejects(pending, (error: unknown) => {
      assert.ok(error instanceof PoolError);
      assert.equal(error.target, 'local name=close-pending');
      assert.match(error.message, /the pool was closed while the acquire waited/);
      return true;
    });
    await closed;
    assert.ok(gone.has(held.context.id));
    await assert.rejects(
      held.context.call(() => 1),
      ContextDisconnectedError,
    );
    await assert.rejects(pool.acquire(local('x')), /the pool is closed/);
    held.release();
    await pool.close(); // idempotent
  });

  test('malformed targets and options are refused, naming the field', async () => {
    const pool = new ContextPool(router);
    const refused = async (target: unknown, option: string, pattern: RegExp) =>
      assert.rejects(pool.acquire(target as PoolTarget), (error: unknown) => {
        assert.ok(error instanceof InvalidOptionError, String(error));
        assert.equal(error.option, option);
        assert.match(error.message, pattern);
        return true;
      });
    await refused({ method: 'telnet', hostname: 'h' }, 'method', /one of 'local', 'ssh', 'openssh', 'sudo'/);
    await refused(null, 'target', /a target object/);
    await refused([], 'target', /a target object/);
    await refused({ method: 'sudo', via: 42 }, 'via', /a target object or a Context/);
    await refused({ method: 'sudo', via: { method: 'nope' } }, 'via.method', /got "nope"/);
    await refused({ method: 'sudo', via: { method: 'ssh' } }, 'via.hostname', /a host name/);
    await refused({ method: 'ssh', hostname: 'h', port: 'x' }, 'port', /an integer from 1 to 65535/);
    await refused({ method: 'ssh', hostname: 'h', port: 70000 }, 'port', /an integer/);
    await refused({ method: 'sudo', username: 7 }, 'username', /a non-empty string/);
    await refused({ method: 'local', name: '' }, 'name', /a non-empty string/);
    await refused({ method: 'ssh', hostname: 'h', proxyJump: [{}] }, 'proxyJump[0].hostname', /a host name/);
    let deep: unknown = { method: 'local' };
    for (let i = 0; i < 20; i++) deep = { method: 'sudo', via: deep };
    await assert.rejects(pool.acquire(deep as PoolTarget), /a chain of at most 16 targets/);
    await assert.rejects(pool.acquire(local('x'), { unique: 'yes' } as never), /option unique/);
    await assert.rejects(pool.acquire(local('x'), { timeout: -1 }), /option timeout/);
    await assert.rejects(pool.acquire(local('x'), { signal: {} } as never), /option signal/);
    assert.throws(() => new ContextPool(router, { maxConnecting: 0 }), /option maxConnecting/);
    assert.throws(() => new ContextPool(router, { maxContexts: 1.5 }), /option maxContexts/);
    assert.throws(() => new ContextPool(router, { idleTimeout: Number.NaN }), /option idleTimeout/);
    assert.throws(() => new ContextPool({} as Router), /option router of new ContextPool\(\) must be a Router/);
    const small = new ContextPool(router, { maxContexts: 1 });
    await assert.rejects(small.acquire({ method: 'sudo', via: { method: 'local' } }), (error: unknown) => {
      assert.ok(error instanceof PoolError);
      assert.match(error.message, /need 2 contexts and the pool's maxContexts is 1/);
      return true;
    });
    assert.deepEqual(pool.stats(), { contexts: 0, idle: 0, connecting: 0, waiting: 0, hits: 0, misses: 0 });
    await small.close();
    await pool.close();
  });

  test('keys: what makes another connection and what does not', () => {
    const key = (target: PoolTarget) => describeTarget(target).key;
    const ssh = { method: 'ssh', hostname: 'Web1' } as const;
    assert.equal(key(ssh), key({ ...ssh, hostname: 'web1', port: 22 }), 'host case and the default port');
    assert.equal(key(ssh), key({ ...ssh, password: 'x', connectTimeout: 5, identityFile: '/k' }), 'credentials');
    assert.notEqual(key(ssh), key({ ...ssh, port: 2222 }));
    assert.notEqual(key(ssh), key({ ...ssh, username: 'deploy' }));
    assert.notEqual(key(ssh), key({ ...ssh, name: 'n' }));
    assert.notEqual(key(ssh), key({ ...ssh, proxyJump: 'bastion' }));
    assert.notEqual(key(ssh), key({ ...ssh, method: 'openssh' }));
    assert.equal(key({ method: 'sudo' }), key({ method: 'sudo', username: 'root' }), "sudo's default account");
    assert.notEqual(key({ method: 'sudo' }), key({ method: 'su' }));
    assert.notEqual(key({ method: 'sudo' }), key({ method: 'sudo', via: ssh }));
    assert.notEqual(key({ method: 'sudo', via: ssh }), key({ method: 'sudo', via: { ...ssh, username: 'u' } }));
    assert.equal(
      describeTarget({ method: 'sudo', via: { ...ssh, username: 'deploy' } }).label,
      'sudo:root via ssh:deploy@web1',
    );
  });

  test('router.pool: one per router, closed by router.shutdown()', async () => {
    const own = new Router();
    assert.equal(own.pool, own.pool);
    const held = await own.pool.acquire({ method: 'local' });
    const waiting = new ContextPool(own, { maxContexts: 1 });
    await waiting.acquire(local('first'));
    const pending = waiting.acquire(local('second'));
    await waitFor(() => waiting.stats().waiting === 1);
    const shutdown = own.shutdown();
    await assert.rejects(pending, PoolError);
    await shutdown;
    await assert.rejects(
      held.context.call(() => 1),
      ContextDisconnectedError,
    );
    await assert.rejects(own.pool.acquire({ method: 'local' }), PoolError);
  });
});

describe('pool: over ssh', { timeout: 120_000 }, () => {
  let bed: Testbed;
  let router: Router;
  let relay: Awaited<ReturnType<typeof countingRelay>>;
  let gone: Set<number>;
  /** Logs into the test bed through the counting relay. */
  let login: (account?: Testbed['accounts']['key']) => Extract<PoolTarget, { method: 'ssh' }>;

  before(async () => {
    bed = await startTestbed();
    router = new Router();
    gone = departures(router);
    relay = await countingRelay(bed.port);
    // The relay's port is another port of the same sshd: its host key is known under both.
    const knownHosts = join(bed.dir, 'known_hosts_relay');
    const line = readFileSync(bed.knownHosts, 'utf8');
    writeFileSync(knownHosts, `${line}${line.replace(`]:${bed.port} `, `]:${relay.port} `)}`);
    login = (account = bed.accounts.sudoer) => ({
      method: 'ssh',
      ...sshLogin(bed, account),
      port: relay.port,
      knownHostsFile: knownHosts,
      agent: false,
    });
  });
  after(async () => {
    await router.shutdown();
    await relay.close();
    await bed.stop();
  });

  test('the same target twice is one SSH connection; another user, port or name is another', async () => {
    const pool = new ContextPool(router);
    const [a, b] = await Promise.all([pool.acquire(login()), pool.acquire(login())]);
    const c = await pool.acquire(login());
    assert.equal(a.context, b.context);
    assert.equal(c.context, a.context);
    assert.equal(relay.connections(), 1, 'one connection through the relay');
    assert.equal(await a.context.call(whoami), bed.accounts.sudoer.name);

    const otherUser = await pool.acquire(login(bed.accounts.key));
    assert.equal(await otherUser.context.call(whoami), bed.accounts.key.name);
    const named = await pool.acquire({ ...login(), name: 'second-sudoer' });
    const direct = await pool.acquire({ ...login(), port: bed.port, knownHostsFile: bed.knownHosts });
    assert.equal(relay.connections(), 3, 'the direct port does not go through the relay');
    assert.equal(new Set([a, otherUser, named, direct].map((lease) => lease.context.id)).size, 4);
    for (const lease of [a, b, c, otherUser, named, direct]) lease.release();
    await pool.close();
  });

  test('a failed start rejects every acquire waiting on it; the next acquire tries again', async () => {
    const pool = new ContextPool(router);
    const account = bed.accounts.password;
    const target: PoolTarget = { ...login(account), identityFile: undefined, password: 'not the password' };
    const before = relay.connections();
    const results = await Promise.allSettled([pool.acquire(target), pool.acquire(target), pool.acquire(target)]);
    assert.equal(relay.connections() - before, 1, 'one attempt for the three');
    const errors = results.map((result) => (result.status === 'rejected' ? result.reason : result.value));
    for (const error of errors) {
      assert.ok(error instanceof AuthenticationError, String(error));
      assert.equal(error, errors[0], 'each waiter receives the start’s own error');
      assert.match(error.message, new RegExp(`${account.name}@127.0.0.1:${relay.port}`));
    }
    assert.deepEqual(pool.stats(), { contexts: 0, idle: 0, connecting: 0, waiting: 0, hits: 2, misses: 1 });
    // The same key with the right password: a new attempt, not the failed one again.
    const lease = await pool.acquire({ ...target, password: account.password });
    assert.equal(await lease.context.call(whoami), account.name);
    assert.equal(relay.connections() - before, 2);
    lease.release();
    await pool.close();
  });

  test('a via chain: two sudo targets share the ssh hop, which is held while they live', async () => {
    const pool = new ContextPool(router, { maxContexts: 3 });
    const hop = login();
    const sudo = (name: string): PoolTarget => ({ method: 'sudo', username: bed.accounts.target.name, name, via: hop });
    const before = relay.connections();
    const [s1, s2] = await Promise.all([pool.acquire(sudo('s1')), pool.acquire(sudo('s2'))]);
    assert.equal(relay.connections() - before, 1, 'one ssh connection for both');
    assert.equal(s1.context.parentId, s2.context.parentId);
    assert.equal(await s1.context.call(whoami), bed.accounts.target.name);
    assert.equal(
      s1.label,
      `sudo:${bed.accounts.target.name} name=s1 via ssh:${bed.accounts.sudoer.name}@127.0.0.1:${relay.port}`,
    );
    const viaId = s1.context.parentId;
    // The hop is the pool's: acquiring it directly is a hit.
    const direct = await pool.acquire(hop);
    assert.equal(direct.context.id, viaId);
    direct.release();
    assert.deepEqual(pool.stats(), { contexts: 3, idle: 0, connecting: 0, waiting: 0, hits: 2, misses: 3 });

    // Full: room for another is made by closing an idle sudo context, never the hop under a live one.
    s2.release();
    const other = await pool.acquire(local('room-1'));
    assert.ok(gone.has(s2.context.id));
    assert.ok(!gone.has(viaId));
    other.release();
    // An idle child still holds its via: the idle local context goes first, then s1, and only then the hop.
    s1.release();
    const next = await pool.acquire(local('room-2'));
    assert.ok(gone.has(other.context.id));
    assert.ok(!gone.has(s1.context.id) && !gone.has(viaId));
    const last = await pool.acquire(local('room-3'));
    assert.ok(gone.has(s1.context.id), 's1 made room');
    assert.ok(!gone.has(viaId), 'the hop is idle now, and stays until room is needed');
    assert.equal(pool.stats().idle, 1);
    next.release();
    last.release();
    await pool.close();
    assert.ok(gone.has(viaId));
  });
});
