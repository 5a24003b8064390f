import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ChannelError, type Context, type LogRecord, ProtocolError, Router } from 'tendril';
import {
  ALLOCATE_ID,
  CALL_FUNCTION,
  decode,
  encode,
  FORWARD_LOG,
  STOP_CHILD,
  SUBTREE_ID_QUOTA,
} from '#dist/internal.js';
import { frameBytes, writeBytes } from './support/frames.js';
import { forgeConnectReplies } from './support/hostile.js';
import { switchOf } from './support/internals.js';
import { waitFor } from './support/procs.js';
import { collectWarnings } from './support/warnings.js';

/**
 * The trust boundary seen from a child that takes hold of its own stream
 * (raw frames on fd 4) or of its own router (patching the core it runs):
 * nothing it sends may crash, exhaust or mislead the master or its siblings.
 */

describe('what a hostile child can make the master do', () => {
  let router: Router;
  let a: Context;
  let b: Context;
  before(async () => {
    router = new Router();
    [a, b] = await Promise.all([router.local({ name: 'attacker' }), router.local({ name: 'victim' })]);
  });
  after(() => router.shutdown());

  test('a flood of undeliverable requests, while the child does not read, earns a bounded number of dead replies', async () => {
    const floods = collectWarnings(router, 'flood');
    const toAttacker = switchOf(router).routeOf(a.id);
    assert.ok(toAttacker);
    const before = toAttacker.stats.messagesOut;
    const count = 200_000;
    // Handle 999 is no standard handle and below the dynamic range: nothing listens there.
    const took = await a.call(
      writeBytes,
      frameBytes({ dst: 0, src: a.id, handle: 999, replyTo: 1234 }, encode(null)),
      count,
    );
    await waitFor(() => floods.length > 0);
    const sent = toAttacker.stats.messagesOut - before;
    // A burst of 1000, then 1000 a second, plus the call's own reply.
    const allowed = 1000 + Math.ceil((took / 1000 + 1) * 1000) + 10;
    assert.ok(
      sent <= allowed,
      `the master wrote ${sent} messages to the flooding child in ${took} ms (at most ${allowed})`,
    );
    assert.match(floods[0]?.message ?? '', /attacker sent more undeliverable messages than 1000 a second/);
    assert.equal(await b.call(() => 'still here'), 'still here');
    assert.equal(await a.call(() => 'attacker too'), 'attacker too');
  });

  test("a flood addressed to a sibling's refused handle is bounded on the way back", async () => {
    const toAttacker = switchOf(router).routeOf(a.id);
    assert.ok(toAttacker);
    const before = toAttacker.stats.messagesOut;
    const payload = encode({ f: '() => 1', a: [] });
    const flood = a.call(
      writeBytes,
      frameBytes({ dst: b.id, src: a.id, handle: CALL_FUNCTION, replyTo: 1234 }, payload),
      100_000,
    );
    // The victim keeps answering while it is refusing the flood.
    for (let i = 0; i < 5; i++) assert.equal(await b.call((x: number) => x + 1, i), i + 1);
    const took = await flood;
    await b.call(() => 0);
    const sent = toAttacker.stats.messagesOut - before;
    const allowed = 1000 + Math.ceil((took / 1000 + 2) * 1000) + 20;
    assert.ok(
      sent <= allowed,
      `the attacker was sent ${sent} dead replies for 100000 refused calls (at most ${allowed})`,
    );
  });

  test('dead messages and values from another context do not reach a receiver bound to a context', async () => {
    const receiver = router.receiver<string>({ contextId: b.id });
    const refused = collectWarnings(router, 'policy');
    await a.call(
      writeBytes,
      frameBytes({ dst: 0, src: a.id, handle: receiver.handle, flags: 1 }, encode('closed by sender')),
    );
    await a.call(writeBytes, frameBytes({ dst: 0, src: a.id, handle: receiver.handle }, encode('forged value')));
    await waitFor(() => refused.length >= 2);
    assert.equal(receiver.closed, false, 'a dead message from another context does not close it');
    await b.call(
      (sender: { send(v: string): void }) => sender.send('from b'),
      receiver.toSender() as unknown as { send(v: string): void },
    );
    assert.equal(await receiver.get(1000), 'from b', 'only the value from its context arrives');
    assert.equal(receiver.queued, 0);
    receiver.close();
  });

  test('a child cannot exhaust the context ID space; the master keeps starting contexts', async () => {
    const quota = collectWarnings(router, 'quota');
    const malformed = collectWarnings(router, 'handler');
    const requests = Math.ceil(SUBTREE_ID_QUOTA / 1000) + 100;
    await a.call(writeBytes, frameBytes({ dst: 0, src: a.id, handle: ALLOCATE_ID }, encode(10_000)));
    await a.call(writeBytes, frameBytes({ dst: 0, src: a.id, handle: ALLOCATE_ID }, encode(1000)), requests);
    await waitFor(() => quota.length > 0 && malformed.some((w) => /malformed/.test(w.message)));
    assert.match(quota[0]?.message ?? '', /contexts under 'attacker' .* have used their quota of 1048576 context IDs/);
    const pattern = /malformed ALLOCATE_ID message from context 'attacker': count: expected an integer from 1 to 1000/;
    assert.ok(
      malformed.some((w) => pattern.test(w.message)),
      malformed.map((w) => w.message).join('\n'),
    );
    const fresh = await router.local({ name: 'after-the-flood' });
    assert.equal(await fresh.call(() => 'started'), 'started');
    await fresh.shutdown();
  });

  test("a log line cannot carry another context's name", async () => {
    const lines: LogRecord[] = [];
    const listener = (record: LogRecord) => lines.push(record);
    router.on('log', listener);
    // A's own child, whose lines a reports: the name is the master's, not what a wrote.
    const child = await router.local({ name: 'attackers-child', via: a });
    await a.call(
      writeBytes,
      frameBytes({ dst: 0, src: a.id, handle: FORWARD_LOG }, encode([child.id, 'victim', 'spoofed line'])),
    );
    await waitFor(() => lines.some((line) => line.text === 'spoofed line'));
    router.off('log', listener);
    const line = lines.find((record) => record.text === 'spoofed line');
    assert.equal(line?.contextName, 'attackers-child');
    await child.shutdown();
  });

  test('an intermediate that names a context outside its subtree in a CONNECT reply is refused', async () => {
    const liar = await router.local({ name: 'liar' });
    await forgeConnectReplies(liar, b.id);
    await assert.rejects(
      router.local({ name: 'claimed', via: liar }),
      (error: unknown) =>
        error instanceof ProtocolError &&
        /malformed CONNECT message from context 'liar': it replied that the new context has ID \d+, which is not a context started under it/.test(
          error.message,
        ),
    );
    assert.equal(await b.call(() => 'b is b'), 'b is b');
    await liar.shutdown();
  });

  test('a malformed request to a standard handle is answered with a ProtocolError, not silence', async () => {
    const reply = await switchOf(router).request(a.id, STOP_CHILD, encode('not a request'), { timeout: 5000 });
    const [status, error] = decode(reply.data) as [number, { name: string; message: string }];
    assert.equal(status, 1);
    assert.equal(error.name, 'ProtocolError');
    assert.match(
      error.message,
      /malformed STOP_CHILD message from context 'master': request: expected an array of 2 items/,
    );
    assert.equal(await a.call(() => 'alive'), 'alive');
  });

  test('a call to a context that vanished is still rejected, not left waiting', async () => {
    const doomed = await router.local({ name: 'doomed' });
    const pending = doomed.call(() => new Promise(() => {}));
    await doomed.call(() => {
      setTimeout(() => process.kill(process.pid, 'SIGKILL'), 10);
    });
    await assert.rejects(pending, ChannelError);
  });
});
