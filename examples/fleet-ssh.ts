// One function across one SSH host as several accounts, with router.fleet():
// each account is a target of its own (one connection per account, from
// router.pool), a progress bar (cli-progress) with a line per outcome as it
// comes, and the summary, whose failures name their targets.
//
// Run after `npm run build`:
//   node build/examples/fleet-ssh.js HOST[:PORT] USER[:PASSWORD]...
// or with FLEET_HOST and FLEET_ACCOUNTS (space-separated) in the
// environment. An account without a password logs in as your ssh does
// (~/.ssh/config, keys, agent). The test suite runs it against its own
// sshd, with some accounts meant to fail (a wrong password, an account
// that does not exist).
import cliProgress from 'cli-progress';
import { escapeTerminalText, type FleetProgress, type PoolTarget, Router } from 'tendril';

const [where = process.env.FLEET_HOST, ...given] = process.argv.slice(2);
const accounts = given.length > 0 ? given : (process.env.FLEET_ACCOUNTS ?? '').split(/\s+/).filter(Boolean);
if (!where || accounts.length === 0) {
  console.error(
    'usage: node build/examples/fleet-ssh.js HOST[:PORT] USER[:PASSWORD]...\n' +
      '  (or FLEET_HOST and FLEET_ACCOUNTS in the environment): runs one function on HOST as each USER;\n' +
      '  a USER without a password logs in as your ssh would (~/.ssh/config, keys, agent).',
  );
  process.exit(2);
}
const [hostname = '', port] = where.split(':');
const targets: PoolTarget[] = accounts.map((account) => {
  const colon = account.indexOf(':');
  const username = colon === -1 ? account : account.slice(0, colon);
  const password = colon === -1 ? undefined : account.slice(colon + 1);
  return { method: 'ssh', hostname, port: port ? Number(port) : undefined, username, password };
});

/** Runs in each context: who and where it runs. */
function whoAmI() {
  const os = require('node:os') as typeof import('node:os');
  return { user: os.userInfo().username, home: os.homedir(), node: process.version };
}

const router = new Router();
const bars = new cliProgress.MultiBar(
  {
    format: 'accounts [{bar}] {value}/{total} | {succeeded} ok, {failed} failed, {running} connecting or running',
    noTTYOutput: true,
    notTTYSchedule: 250,
  },
  cliProgress.Presets.shades_classic,
);
try {
  const fleet = router.fleet(targets, (context, _target, { signal }) => context.callWith({ signal }, whoAmI), {
    timeout: 30_000,
  });
  const bar = bars.create(targets.length, 0, { succeeded: 0, failed: 0, running: 0 });
  const show = ({ done, succeeded, failed, running }: FleetProgress) =>
    bar.update(done, { succeeded, failed, running });
  fleet.on('progress', show);
  for await (const outcome of fleet) {
    bars.log(
      outcome.ok
        ? // What a target returned is its own text: escaped, so it cannot drive the terminal.
          `ok    ${outcome.label}: ${escapeTerminalText(`${outcome.value.user}, home ${outcome.value.home}, node ${outcome.value.node}`)}\n`
        : `fail  ${outcome.error.message}\n`,
    );
  }
  show(fleet.progress);
  bars.update(); // draws what log() queued since the last redraw: stop() does not
  bars.stop();
  console.log((await fleet.summary()).format());
} finally {
  bars.stop();
  await router.shutdown();
}
