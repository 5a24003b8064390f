/**
 * The listener's handshake, the only messages on a listener stream that
 * the routers do not route: the joining process's hello, then the master's
 * welcome (its place in the tree) or refusal (a dead message with the
 * reason). Both travel on the BOOT handle, as a child's configuration does.
 */
import type { ContextInfo } from '../core/context.js';
import { FLAG_DEAD, Message } from '../core/message.js';
import { BOOT } from '../core/protocol/handles.js';

/** Version of this handshake; a master refuses another. */
export const HELLO_VERSION = 1;
/** Longest name a joining process may ask for, in characters. */
export const MAX_PEER_NAME = 64;

/** What the joining process says first. */
export interface Hello {
  /** `HELLO_VERSION`. */
  version: number;
  /** Name it asks for; the master's default is `worker:<pid>`. */
  name: string | null;
}

/** What the master answers: the peer's place in the tree. */
export interface Welcome {
  /** The peer's context ID. */
  id: number;
  /** The peer's name (unique in the master's tree). */
  name: string;
  /** Largest payload accepted or sent in the tree, in bytes. */
  maxMessageSize: number;
  /** The master's name. */
  masterName: string;
  /** What the master reports about itself, as a context reports when it is ready. */
  masterInfo: ContextInfo;
}

/** The hello as a message (sent before the peer has an ID). */
export function helloMessage(hello: Hello): Message {
  return Message.encoded({ dst: 0, src: 0, auth: 0, handle: BOOT, replyTo: 0 }, [hello.version, hello.name]);
}

/** The welcome as a message to the peer. */
export function welcomeMessage(welcome: Welcome): Message {
  return Message.encoded({ dst: welcome.id, src: 0, auth: 0, handle: BOOT, replyTo: 0 }, welcome);
}

/** A refusal, saying why. */
export function refusalMessage(reason: string): Message {
  return Message.encoded({ dst: 0, src: 0, auth: 0, handle: BOOT, replyTo: 0, flags: FLAG_DEAD }, reason);
}

/**
 * The hello in `message`.
 * @throws Error saying what is wrong with it.
 */
export function readHello(message: Message): Hello {
  if (message.handle !== BOOT) throw new Error(`its first message was for handle ${message.handle}, not a hello`);
  const value = message.unpack();
  if (!Array.isArray(value) || value.length !== 2) throw new Error('its hello is not [version, name]');
  const [version, name] = value as unknown[];
  if (version !== HELLO_VERSION) {
    throw new Error(
      `it speaks handshake version ${String(version)}, this master ${HELLO_VERSION}: update tendril on one side`,
    );
  }
  if (name !== null && !isPeerName(name)) {
    throw new Error(`the name it asked for is not 1 to ${MAX_PEER_NAME} printable characters`);
  }
  return { version, name };
}

/** True for a name a peer may have: 1 to MAX_PEER_NAME printable ASCII characters. */
export function isPeerName(name: unknown): name is string {
  return typeof name === 'string' && name.length > 0 && name.length <= MAX_PEER_NAME && /^[\x21-\x7e]+$/.test(name);
}

/**
 * The master's answer in `message`: its welcome, or the reason it refused.
 * @throws Error when it is neither.
 */
export function readWelcome(message: Message): Welcome | { refused: string } {
  if (message.handle !== BOOT) throw new Error(`the master's first message was for handle ${message.handle}`);
  const value = message.unpack();
  if (message.isDead) return { refused: typeof value === 'string' ? value : 'no reason given' };
  const welcome = value as Partial<Welcome> | null;
  const info = welcome?.masterInfo as Partial<ContextInfo> | undefined;
  if (
    !welcome ||
    typeof welcome !== 'object' ||
    !Number.isInteger(welcome.id) ||
    (welcome.id as number) <= 0 ||
    typeof welcome.name !== 'string' ||
    typeof welcome.masterName !== 'string' ||
    !Number.isInteger(welcome.maxMessageSize) ||
    !info ||
    typeof info.pid !== 'number' ||
    typeof info.nodeVersion !== 'string'
  ) {
    throw new Error('the master answered with a malformed welcome');
  }
  return welcome as Welcome;
}
