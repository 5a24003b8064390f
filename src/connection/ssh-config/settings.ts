/**
 * The state reading a config builds up: the local facts it is read
 * against and what its lines have set so far. The reader and the Match
 * evaluator share it, because a Match line sees the settings of the lines
 * above it (HostName and User), as in OpenSSH.
 */
import type { JumpSetting } from './proxy-jump.js';

/** OpenSSH's StrictHostKeyChecking values (`true`/`false`/`off` normalised to these). */
export type StrictHostKeyChecking = 'yes' | 'no' | 'ask' | 'accept-new';

/** The local facts tokens and Match criteria use. */
export interface Local {
  /** The home directory for `~`, `%d` and relative Includes. */
  home: string;
  /** The local account (`%u`, `Match localuser`). */
  user: string;
  /** The environment for `${VAR}` and `Match exec`. */
  env: Record<string, string | undefined>;
  /** Whether `Match exec` commands run at all. */
  matchExec: boolean;
}

/** What the config set so far; unset fields are undefined, and only an unset field takes a value. */
export interface Settings {
  /** HostName, unexpanded. */
  hostname?: string;
  /** User. */
  user?: string;
  /** Port. */
  port?: number;
  /** IdentityFile lines in order, a path once per level as OpenSSH dedups them (`userProvided`: not from the system config). */
  identityFiles: { path: string; userProvided: boolean }[];
  /** UserKnownHostsFile, as written. */
  userKnownHostsFiles?: string[];
  /** GlobalKnownHostsFile, as written. */
  globalKnownHostsFiles?: string[];
  /** StrictHostKeyChecking. */
  strictHostKeyChecking?: StrictHostKeyChecking;
  /** IdentitiesOnly. */
  identitiesOnly?: boolean;
  /** IdentityAgent, unexpanded. */
  identityAgent?: string;
  /** ProxyJump and ProxyCommand share one slot: whichever comes first wins. */
  proxy?: JumpSetting | { command: string };
  /** ConnectTimeout in seconds. */
  connectTimeout?: number;
  /** ServerAliveInterval in seconds. */
  serverAliveInterval?: number;
  /** ServerAliveCountMax. */
  serverAliveCountMax?: number;
  /** HashKnownHosts. */
  hashKnownHosts?: boolean;
  /** HostKeyAlias, as written. */
  hostKeyAlias?: string;
}
