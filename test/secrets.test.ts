import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT } from './support/procs.js';
import { startTestbed, type Testbed } from './support/testbed.js';

/** Every process's command line, joined. */
function allCommandLines(): string {
  let text = '';
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      text += `${readFileSync(`/proc/${entry}/cmdline`, 'latin1')}\n`;
    } catch {
      // Gone.
    }
  }
  return text;
}

describe('secrets', () => {
  let bed: Testbed;
  before(async () => {
    bed = await startTestbed();
  });
  after(() => bed.stop());

  test('passwords and passphrases never appear in debug output, errors, logs or any command line', async () => {
    const secrets = [bed.accounts.password.password, bed.accounts.target.password, bed.passphrase];
    const master = spawn(process.execPath, [join(ROOT, 'build', 'test', 'fixtures', 'secrets-master.js')], {
      env: {
        ...process.env,
        DEBUG: '*',
        TENDRIL_SECRETS_BED: JSON.stringify({
          port: bed.port,
          knownHosts: bed.knownHosts,
          encryptedKeyFile: bed.encryptedKeyFile,
          passphrase: bed.passphrase,
          password: bed.accounts.password,
          target: bed.accounts.target,
        }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    master.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    master.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => master.on('exit', resolve));
    let scans = 0;
    let running = true;
    void exited.then(() => {
      running = false;
    });
    // The secret is given on the command line of the test fixture's env only; scan everything else meanwhile.
    while (running) {
      const lines = allCommandLines();
      for (const secret of secrets) assert.ok(!lines.includes(secret), 'a secret appeared on a command line');
      scans++;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.equal(await exited, 0, output);
    assert.ok(scans > 20, `only ${scans} scans of the process table`);
    assert.match(output, /sudo: ok/);
    assert.match(output, /su: ok/);
    assert.match(output, /openssh: ok/);
    assert.match(output, /passphrase: ok/);
    assert.match(output, /wrong sudo: .*PasswordError/);
    assert.match(output, /tendril:/, 'debug output was on');
    for (const secret of secrets) assert.ok(!output.includes(secret), 'a secret appeared in the output');
  });
});
