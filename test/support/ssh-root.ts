/**
 * What the container test files that need more than root on this machine
 * share: the SSH test bed (its accounts: one not root, for the "not
 * allowed" tests; one that may sudo to root, for the via tests), a scratch
 * directory, and root on the far side of an ssh context.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import type { Context, Router } from 'tendril';
import { sshLogin, startTestbed, type Testbed } from './testbed.js';

/** The test bed and scratch directory of a suite, set by its `before` hooks. */
export interface SshBedSuite {
  readonly testbed: Testbed;
  /** A directory of the suite's own (mode 0700), removed after it. */
  readonly scratch: string;
  /** Root reached with sudo from an ssh login to the test bed: the far side of a via test. */
  sshRoot(router: Router): Promise<Context>;
}

/** Registers `before` and `after` hooks in the calling suite that start and stop the test bed and scratch directory. */
export function sshBedSuite(scratchPrefix: string): SshBedSuite {
  let testbed: Testbed | undefined;
  let scratch: string | undefined;
  before(async () => {
    testbed = await startTestbed();
    scratch = mkdtempSync(join(tmpdir(), scratchPrefix));
  });
  after(async () => {
    await testbed?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the suite has not started: use it in tests, not while declaring them');
    return value;
  };
  return {
    get testbed() {
      return started(testbed);
    },
    get scratch() {
      return started(scratch);
    },
    async sshRoot(router) {
      const bed = started(testbed);
      const login = await router.ssh(sshLogin(bed, bed.accounts.docs));
      return router.sudo({ via: login, password: bed.accounts.docs.password });
    },
  };
}
