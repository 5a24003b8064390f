// A target without Node, for real: an sshd of the suite's own running
// where the host's Node is hidden (test/support/testbed.ts, withoutNode),
// so every session it serves finds no Node on its own.
import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { InterpreterError, Router } from 'tendril';
import { sshLogin, startTestbed, type Testbed } from './support/testbed.js';

describe('an ssh target without Node', () => {
  let bed: Testbed;
  let router: Router;
  before(async () => {
    bed = await startTestbed({ withoutNode: true });
    router = new Router();
  });
  after(async () => {
    await router?.shutdown();
    await bed?.stop();
  });

  test('is an InterpreterError naming the host, the account, every place tried and what the target is', async () => {
    await assert.rejects(router.ssh(sshLogin(bed)), (error: unknown) => {
      assert.ok(error instanceof InterpreterError, String(error));
      const account = bed.accounts.sudoer.name;
      assert.match(error.message, new RegExp(`no Node\\.js interpreter found on \\S+ for user ${account} with PATH=`));
      assert.match(error.message, /tried node, nodejs, .*\/usr\/bin\/node, /s);
      assert.match(error.message, /the target is Linux \S+, [^,]+, glibc \d+\.\d+: install Node there \(12 or newer\)/);
      return true;
    });
  });

  test('its sessions see no Node, and one named by nodePath runs there', async () => {
    // A copy outside the hidden places: the bed covers Node where a shell looks, not everywhere.
    const elsewhere = join(bed.dir, 'node-elsewhere');
    copyFileSync(process.execPath, elsewhere);
    const context = await router.ssh({ ...sshLogin(bed), nodePath: elsewhere });
    assert.equal(await context.call(() => process.execPath), elsewhere);
    const looked = await context.exec('sh', ['-c', 'command -v node || command -v nodejs || echo none']);
    assert.equal(looked.stdout.trim(), 'none');
    await context.shutdown();
  });
});
