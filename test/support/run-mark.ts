/**
 * The environment variable that marks the processes of one test file's run
 * (test/support/leak-check.ts sets it; test/support/testbed.ts carries it
 * across sudo, doas and the test bed's sshd), so that the leak check of one
 * run never takes another run's processes for its own.
 */
export const MARK_VARIABLE = 'TENDRIL_TEST_RUN';
